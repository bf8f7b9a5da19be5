"""Looking up what was paid, by a backend with a ``zpk_`` key: deliveries (by id, or by
the developer's idempotency key) and receipts (spec 4.3)."""

from __future__ import annotations

from functools import partial
from typing import Any

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from payments.developer.services import DeveloperServices
from payments.ledger.config import LedgerConfig
from payments.ledger.keyauth import app_for_key, authorized_key, presented_key, require_app_access
from payments.ledger.lookups import ByKey, lookup_delivery, lookup_delivery_by_key, lookup_receipt


class LookupRoutes:
    def __init__(self, services: DeveloperServices, config: LedgerConfig) -> None:
        self.s = services
        self.c = config

    def routes(self) -> list[Route]:
        return [
            Route("/api/deliveries", self.find_delivery, methods=["GET"]),
            Route("/api/deliveries/{delivery_id}", self.get_delivery, methods=["GET"]),
            Route("/api/receipts/{charge_id}", self.get_receipt, methods=["GET"]),
        ]

    async def get_delivery(self, request: Request) -> Response:
        secret = presented_key(request)
        delivery_id = request.path_params["delivery_id"]
        now = self.s.clock()

        def work(session: Session) -> dict[str, Any]:
            api_key = authorized_key(session, secret, "deliveries:read", now)
            return lookup_delivery(session, delivery_id, self.c.params,
                                   partial(require_app_access, api_key))
        return JSONResponse(await self.s.run(work))

    async def find_delivery(self, request: Request) -> Response:
        """By the developer's idempotency key (ours, beyond spec 4.3: docs/decisions.md)."""
        secret = presented_key(request)
        query = request.query_params
        now = self.s.clock()

        def work(session: Session) -> dict[str, Any]:
            api_key = authorized_key(session, secret, "deliveries:read", now)
            asked = ByKey.from_query(query)
            return lookup_delivery_by_key(session, app_for_key(session, api_key, asked.app),
                                          asked.key, self.c.params)
        return JSONResponse(await self.s.run(work))

    async def get_receipt(self, request: Request) -> Response:
        secret = presented_key(request)
        charge_id = request.path_params["charge_id"]
        now = self.s.clock()

        def work(session: Session) -> dict[str, Any]:
            api_key = authorized_key(session, secret, "receipts:read", now)
            return lookup_receipt(session, charge_id, self.c.params,
                                  partial(require_app_access, api_key))
        return JSONResponse(await self.s.run(work))

