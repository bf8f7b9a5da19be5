"""The console's config revision pages: an app's revisions, newest first, a page at a time,
and one revision's ops and config, read-only.

Both read through ``payments.config.history``, the functions the configuration API answers
from, so a page shows exactly what ``GET /api/developer/config/revisions`` does. Changes
go through ``svc config apply`` and the API (apply, rollback), which the pages name.
"""

from __future__ import annotations

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import Response

from payments.config.history import (
    revision_cursor,
    revision_detail,
    revision_numbers,
    revision_of,
    revisions_of,
)
from payments.developer.auth import Principal
from payments.errors import ApiError
from portal.console.context import Console
from portal.console.revision_views import (
    RevisionList,
    RevisionShown,
    revision_page,
    revisions_page,
)

PAGE_SIZE = 25
READ = "apps:read"  # what the API asks of a grant; a console session holds every scope


class RevisionPages:
    def __init__(self, console: Console, page_size: int = PAGE_SIZE) -> None:
        self.c = console
        self.page_size = page_size

    async def list(self, request: Request) -> Response:
        slug = request.path_params["app"]
        before_text = request.query_params.get("before")

        def work(session: Session, who: Principal) -> RevisionList:
            app = who.app(session, slug, READ)
            before = revision_cursor(before_text, status=400)
            found = revisions_of(session, app.id, before=before, limit=self.page_size)
            targets = {r["rollbackOf"] for r in found.revisions if r["rollbackOf"]}
            return RevisionList(app.slug, before, found,
                                revision_numbers(session, app.id, targets))
        try:
            nav, listed = await self.c.as_developer(request, work)
        except ApiError as error:
            return self.c.failure(request, error)
        return revisions_page(nav, listed)

    async def show(self, request: Request) -> Response:
        slug, ref = request.path_params["app"], request.path_params["revision"]

        def work(session: Session, who: Principal) -> RevisionShown:
            app = who.app(session, slug, READ)
            revision = revision_of(session, app.id, ref)
            if revision is None:  # also another app's: the same answer, nothing of it shown
                raise ApiError("config_revision_not_found", 404,
                               f"No config revision '{ref}' on this app.")
            target = revision.rollback_of
            numbers = revision_numbers(session, app.id, {target} if target else set())
            return RevisionShown(app.slug, revision_detail(session, revision),
                                 numbers.get(target) if target else None)
        try:
            nav, shown = await self.c.as_developer(request, work)
        except ApiError as error:
            return self.c.failure(request, error, back=f"/apps/{slug}/config")
        return revision_page(nav, shown)

