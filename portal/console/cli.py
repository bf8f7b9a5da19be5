"""Approving CLI sign-ins in the browser (spec 5.3): ``/device`` and ``/cli/approve``."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import Response

from payments.developer import grants
from payments.developer.api import answer_cli_request
from payments.developer.auth import Principal
from payments.errors import ApiError
from payments.models import App
from payments.ratelimit import Limit
from portal.console.cli_views import PendingView, answered_page, approve_page, device_page
from portal.console.context import AUTH_REQUIRED, Console
from portal.console.forms import Form, read_form
from portal.console.layout import Nav

MAX_CODE = 32
Pending = tuple[PendingView, list[tuple[str, str]]]


class CliPages:
    def __init__(self, console: Console) -> None:
        self.c = console
        self.s = console.services

    async def device(self, request: Request) -> Response:
        try:
            nav, _ = await self.c.as_developer(request, lambda session, who: None)
        except ApiError as error:
            return self.c.failure(request, error)
        return device_page(nav, request.query_params.get("code", "")[:MAX_CODE])

    def _pending(self, session: Session, who: Principal, code: str) -> Pending | ApiError:
        # Returned, not raised: the page still needs the signed-in header to show it.
        try:
            record = grants.pending_request(session, code, self.s.clock())
        except ApiError as error:
            return error
        apps = session.scalars(select(App).where(App.organization_id.in_(
            who.organization_ids)).order_by(App.created_at)).all()
        view = PendingView(record.user_code, record.app_slug, list(record.scopes),
                           record.ttl_seconds, record.expires_at)
        return view, [(a.slug, a.name) for a in apps]

    async def approve_form(self, request: Request) -> Response:
        code = request.query_params.get("code", "").strip()[:MAX_CODE]
        # Each opening looks a user code up, so a signed-in script could walk the codes:
        # counted per developer, as approving is (the re-shown form after a refused
        # approval was counted by that approval).
        return await self._approve_form(request, code, limit=self.s.limits.grant_lookup)

    async def _approve_form(self, request: Request, code: str,
                            error: ApiError | None = None, *,
                            limit: Limit | None = None) -> Response:
        try:
            nav, found = await self.c.as_developer(
                request, lambda session, who: self._pending(session, who, code), limit=limit)
        except ApiError as failed:
            return self.c.failure(request, failed, back=f"/cli/approve?code={code}")
        return self._show(nav, code, found, error)

    @staticmethod
    def _show(nav: Nav, code: str, found: Pending | ApiError,
              error: ApiError | None) -> Response:
        if isinstance(found, ApiError):  # gone or answered: no approve form left to show
            return device_page(nav, code, found)
        view, apps = found
        return approve_page(nav, view, apps, error)

    async def approve(self, request: Request) -> Response:
        form = Form({})
        now = self.s.clock()

        def work(session: Session, who: Principal) -> tuple[str, str | None]:
            who.require_session("Approving a CLI sign-in")
            decision = form.get("decision")
            if decision not in ("approve", "deny"):
                raise ApiError("invalid_field", 422, "Choose Approve or Deny.")
            answer = answer_cli_request(session, who, form.get("code"), decision,
                                        form.optional("app"), now)
            return str(answer["status"]), answer.get("app")
        try:
            form = await read_form(request)
            nav, (status, app) = await self.c.as_developer(
                request, work, form=form, limit=self.s.limits.grant_approval)
        except ApiError as error:
            code = form.get("code")[:MAX_CODE]
            if error.code in (AUTH_REQUIRED, "csrf_failed"):
                return self.c.failure(request, error, back=f"/cli/approve?code={code}")
            return await self._approve_form(request, code, error)
        return answered_page(nav, status, app)
