"""The organization keys page (``/keys``): list, create (secret shown once), revoke.

A new key is posted to ``/keys/new``, not ``/keys``: the created page's link back to
``/keys#keys`` must load the list, and from ``/keys`` itself a browser would only scroll,
leaving the secret on screen.

The rules are ``payments.developer.org_keys``'; the console is always a session, so they
hold here as they do on ``/api/developer/keys``.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from payments.developer import org_keys
from payments.developer.auth import Principal
from payments.developer.keys import revoke_key
from payments.developer.models import Organization
from payments.developer.views import key_view
from payments.errors import ApiError
from portal.console.context import Console
from portal.console.forms import Form, read_form
from portal.console.key_creation import create_once, form_token
from portal.console.key_views import NewKey, key_answer
from portal.console.org_key_views import OrganizationKeys, org_keys_page

# Errors that leave no form to show them on: answered by Console.failure.
PAGE_ERRORS = frozenset({"developer_auth_required", "csrf_failed", "key_not_found",
                         "unsupported_media_type", "payload_too_large", "invalid_form"})
BACK = "/keys"


class OrganizationKeyPages:
    def __init__(self, console: Console) -> None:
        self.c = console
        self.s = console.services

    @staticmethod
    def _state(session: Session, who: Principal) -> OrganizationKeys:
        organizations = session.scalars(select(Organization).where(
            Organization.id.in_(who.organization_ids)).order_by(Organization.created_at)).all()
        return OrganizationKeys([(o.id, o.name) for o in organizations],
                                [key_view(k) for k in org_keys.organization_keys(session, who)])

    async def show(self, request: Request) -> Response:
        return await self._show(request, done=request.query_params.get("done"))

    async def _show(self, request: Request, *, done: str | None = None,
                    error: ApiError | None = None) -> Response:
        try:
            nav, state = await self.c.as_developer(request, self._state)
        except ApiError as failed:
            return self.c.failure(request, failed, back=BACK)
        return org_keys_page(nav, state, done=done, error=error)

    async def create(self, request: Request) -> Response:
        form = Form({})

        def work(session: Session, who: Principal) -> NewKey:
            token = form_token(form)
            return create_once(session, who, lambda: org_keys.create_organization_key(
                session, who, organization_id=form.optional("organizationId"),
                label=form.get("label"), scopes=form.all("scope"),
                environment=form.get("environment", "test"), now=self.s.clock(),
                form_token=token))
        try:
            form = await read_form(request)
            nav, made = await self.c.as_developer(
                request, work, form=form, limit=self.s.limits.key_management)
        except ApiError as error:
            if error.code in PAGE_ERRORS:
                return self.c.failure(request, error, back=BACK)
            return await self._show(request, error=error)
        # Answered directly, never redirected: the secret exists only in this response (a
        # second sending of the form is answered without it, key_creation).
        return key_answer(nav, made)

    async def revoke(self, request: Request) -> Response:
        key_id = request.path_params["key"]

        def work(session: Session, who: Principal) -> None:
            revoke_key(org_keys.organization_key(session, who, key_id), self.s.clock())
        try:
            form = await read_form(request)
            await self.c.as_developer(request, work, form=form,
                                      limit=self.s.limits.key_management)
        except ApiError as error:
            if error.code in PAGE_ERRORS:
                return self.c.failure(request, error, back=BACK)
            return await self._show(request, error=error)
        return RedirectResponse(f"{BACK}?done=key-revoked#keys", status_code=303)
