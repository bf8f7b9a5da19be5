"""The JSON routes of organization keys (``payments.developer.org_keys``).

Mounted on the console host only, beside ``payments.developer.api``: only a console session
may use them, and the API host never reads that session. The shapes follow the app-key
routes: the secret is in the creation answer only, every answer naming a key is
``no-store`` (``payments.developer.key_answers``), changes spend the developer's
``key_management`` budget.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from payments.developer import org_keys
from payments.developer.auth import Principal, credentials, run_as
from payments.developer.key_answers import created_answer, key_answer
from payments.developer.key_idempotency import HEADER as IDEMPOTENCY_HEADER
from payments.developer.keys import key_changes, new_key_fields, revoke_key, update_key
from payments.developer.services import DeveloperServices
from payments.developer.views import key_view
from payments.http import field_str, json_after_auth
from payments.ratelimit import Limit


class OrganizationKeyApi:
    def __init__(self, services: DeveloperServices) -> None:
        self.s = services

    def routes(self) -> list[Route]:
        p = "/api/developer/keys"
        return [
            Route(p, self.list_keys, methods=["GET"]),
            Route(p, self.create_key, methods=["POST"]),
            Route(f"{p}/{{key}}", self.update_key, methods=["PATCH"]),
            Route(f"{p}/{{key}}/revoke", self.revoke_key, methods=["POST"]),
        ]

    async def _as(self, request: Request, work: Callable[[Session, Principal], Any],
                  limit: Limit | None = None) -> Any:
        return await run_as(self.s, credentials(request, self.s.cookies, accept_session=True),
                            work, limit)

    async def list_keys(self, request: Request) -> Response:
        def work(session: Session, who: Principal) -> dict[str, Any]:
            return {"keys": [key_view(k) for k in org_keys.organization_keys(session, who)]}
        return key_answer(await self._as(request, work))

    async def create_key(self, request: Request) -> Response:
        read_body = await json_after_auth(request)
        idempotency_header = request.headers.get(IDEMPOTENCY_HEADER)

        def work(session: Session, who: Principal) -> dict[str, Any]:
            who.require_session(org_keys.ACTION)  # before the body: a grant learns nothing
            body = read_body()
            fields = new_key_fields(body, idempotency_header)
            organization = field_str(body, "organizationId", required=False, max_length=48)
            created = org_keys.create_organization_key(
                session, who, organization_id=organization, label=fields.label,
                scopes=fields.scopes, environment=fields.environment, now=self.s.clock(),
                idempotency_key=fields.idempotency_key)
            # The only response that ever carries the secret.
            return {"key": key_view(created.key), "secret": created.secret}
        return await created_answer(self._as(request, work, self.s.limits.key_management))

    async def update_key(self, request: Request) -> Response:
        key_id = request.path_params["key"]
        read_body = await json_after_auth(request)

        def work(session: Session, who: Principal) -> dict[str, Any]:
            who.require_session(org_keys.ACTION)
            key = org_keys.organization_key(session, who, key_id)  # 404 before the body
            label, scopes = key_changes(read_body())
            update_key(key, label=label, scopes=scopes)
            session.flush()
            return {"key": key_view(key)}
        return key_answer(await self._as(request, work, self.s.limits.key_management))

    async def revoke_key(self, request: Request) -> Response:
        key_id = request.path_params["key"]

        def work(session: Session, who: Principal) -> dict[str, Any]:
            key = org_keys.organization_key(session, who, key_id)
            revoke_key(key, self.s.clock())
            return {"key": key_view(key)}
        return key_answer(await self._as(request, work, self.s.limits.key_management))
