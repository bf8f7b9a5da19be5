"""Delivery and receipt lookups for a developer signed in to the console (spec 5.1 item 5).

The same paths and bodies as the API host's key-authenticated lookups, served on the console
host, where the console session cookie lives (it never crosses to the API host). A CLI grant
is refused here as on the API host: grants are not API keys (docs/developer-auth.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from payments.apps import app_by_ref
from payments.chain.params import ChainParams
from payments.developer.auth import Principal, authenticate, credentials
from payments.developer.services import DeveloperServices
from payments.errors import ApiError
from payments.ledger.lookups import (
    Allow,
    ByKey,
    lookup_delivery,
    lookup_delivery_by_key,
    lookup_receipt,
)
from payments.models import App


def member_of(principal: Principal) -> Allow:
    def allow(app: App | None, what: str) -> App:
        if app is None or app.organization_id not in principal.organization_ids:
            raise ApiError("not_found", 404, f"No such {what} in your organization.")
        return app
    return allow


class SessionLookups:
    def __init__(self, services: DeveloperServices, params: ChainParams) -> None:
        self.s = services
        self.params = params

    def routes(self) -> list[Route]:
        return [Route("/api/deliveries", self.find_delivery, methods=["GET"]),
                Route("/api/deliveries/{delivery_id}", self.get_delivery, methods=["GET"]),
                Route("/api/receipts/{charge_id}", self.get_receipt, methods=["GET"])]

    async def _signed_in(self, request: Request,
                         lookup: Callable[[Session, Allow], dict[str, Any]]) -> Response:
        creds = credentials(request, self.s.cookies, accept_session=True)
        if creds.bearer is not None:
            raise ApiError("developer_session_required", 401, "Lookups on the console host "
                           "take the console session; backends call the API host with a "
                           "zpk_ key.")
        now = self.s.clock()

        def work(session: Session) -> dict[str, Any]:
            principal = authenticate(session, creds, now, self.s.policy, self.s.console_url)
            return lookup(session, member_of(principal))
        return JSONResponse(await self.s.run(work), headers={"cache-control": "no-store"})

    async def get_delivery(self, request: Request) -> Response:
        delivery_id = request.path_params["delivery_id"]
        return await self._signed_in(request, lambda session, allow: lookup_delivery(
            session, delivery_id, self.params, allow))

    async def find_delivery(self, request: Request) -> Response:
        query = request.query_params

        def lookup(session: Session, allow: Allow) -> dict[str, Any]:
            asked = ByKey.from_query(query)
            if asked.app is None:  # a developer may belong to several organizations
                raise ApiError("missing_field", 422, "Name the app with 'app' (its id or "
                               "slug).", field="app")
            app = allow(app_by_ref(session, asked.app), "app")
            return lookup_delivery_by_key(session, app, asked.key, self.params)
        return await self._signed_in(request, lookup)

    async def get_receipt(self, request: Request) -> Response:
        charge_id = request.path_params["charge_id"]
        return await self._signed_in(request, lambda session, allow: lookup_receipt(
            session, charge_id, self.params, allow))
