"""``create_app(settings)``: the reference developer app as one Starlette application.

Routes (spec 4.9), the store opened and its schema created at startup, the backend
client built from ``SVC_API_KEY`` when there is one. Every error is ``{"code",
"message"}``; nothing is built at import time.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from examples.reference_app import page, routes_account, routes_grants, routes_inventory
from examples.reference_app.catalogue import Catalogue
from examples.reference_app.context import AppContext
from examples.reference_app.errors import AppError, handle_app_error
from examples.reference_app.players import SessionSigner
from examples.reference_app.routes_webhook import webhook
from examples.reference_app.settings import Settings
from examples.reference_app.store import FulfilmentStore, engine_for
from svc.backend import AsyncBackendClient

log = logging.getLogger("reference_app")
BACKEND_TIMEOUT = 10.0


def routes() -> list[Route]:
    post = ["POST"]
    return [
        Route("/", page.index, methods=["GET", "HEAD"]),
        Route("/static/{name}", page.static_file, methods=["GET", "HEAD"]),
        Route("/.well-known/svc.json", page.manifest, methods=["GET", "HEAD"]),
        Route("/api/session", routes_account.log_in, methods=post),
        Route("/api/session", routes_account.whoami, methods=["GET"]),
        Route(page.WEBHOOK_PATH, webhook, methods=post),
        Route("/api/svc/purchase", routes_account.purchase, methods=post),
        Route(page.PAYMENT_SUBMITTED_PATH, routes_grants.payment_submitted, methods=post),
        Route("/api/svc/reconcile", routes_grants.reconcile, methods=post),
        Route("/api/svc/trusted-charge", routes_grants.trusted_charge, methods=post),
        Route("/api/svc/order", routes_account.order, methods=post),
        Route("/api/svc/account-handoff", routes_account.account_handoff, methods=post),
        Route("/api/inventory", routes_inventory.inventory, methods=["GET"]),
        Route("/api/inventory/sync", routes_inventory.sync, methods=post),
    ]


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return JSONResponse({"code": code, "message": str(exc.detail)},
                        status_code=exc.status_code)


async def _internal_error(request: Request, exc: Exception) -> Response:
    # Our fault: logged by class (never the request, which may carry a session or proof).
    log.error("internal error on %s: %s", request.url.path, type(exc).__name__)
    return JSONResponse({"code": "internal_error", "message": "Something went wrong on "
                         "this server."}, status_code=500)


def create_app(settings: Settings, *, catalogue: Catalogue | None = None) -> Starlette:
    """The app for ``settings``; ``catalogue`` is what the page sells (see catalogue.py)."""
    context = AppContext(settings=settings, catalogue=catalogue or Catalogue(),
                         signer=SessionSigner(settings.webhook_secret))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        engine = engine_for(settings.database_url)
        context.store = FulfilmentStore(engine)
        context.store.create_schema()
        if settings.api_key is not None:
            context.backend_client = AsyncBackendClient(
                settings.service.api_url, settings.api_key, timeout=BACKEND_TIMEOUT,
                retries=2)
        try:
            yield
        finally:
            if context.backend_client is not None:
                await context.backend_client.aclose()
            engine.dispose()

    app = Starlette(routes=routes(), lifespan=lifespan, exception_handlers={
        AppError: handle_app_error, HTTPException: _http_error, Exception: _internal_error})
    app.state.context = context
    return app
