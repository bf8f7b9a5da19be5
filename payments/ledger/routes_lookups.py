"""Looking up what was paid, by a backend with a ``zpk_`` key: deliveries (by id, or by
the developer's idempotency key) and receipts (spec 4.3)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from payments.developer.models import ApiKey
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
        delivery_id = request.path_params["delivery_id"]
        return await self._answer(request, "deliveries:read", lambda session, key: (
            lookup_delivery(session, delivery_id, self.c.params,
                            partial(require_app_access, key))))

    async def find_delivery(self, request: Request) -> Response:
        """By the developer's idempotency key (ours, beyond spec 4.3: docs/decisions.md)."""
        query = request.query_params

        def answer(session: Session, key: ApiKey) -> dict[str, Any]:
            asked = ByKey.from_query(query)
            return lookup_delivery_by_key(session, app_for_key(session, key, asked.app),
                                          asked.key, self.c.params)
        return await self._answer(request, "deliveries:read", answer)

    async def get_receipt(self, request: Request) -> Response:
        charge_id = request.path_params["charge_id"]
        return await self._answer(request, "receipts:read", lambda session, key: (
            lookup_receipt(session, charge_id, self.c.params, partial(require_app_access, key))))

    async def _answer(self, request: Request, scope: str,
                      answer: Callable[[Session, ApiKey], dict[str, Any]]) -> Response:
        """``answer`` for the request's key, once it is known to hold ``scope``."""
        secret = presented_key(request)
        now = self.s.clock()

        def work(session: Session) -> dict[str, Any]:
            return answer(session, authorized_key(session, secret, scope, now))
        return JSONResponse(await self.s.run(work))
