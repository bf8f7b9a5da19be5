"""What every route needs, built once by the lifespan: settings, store, backend client."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from examples.reference_app.catalogue import Catalogue
from examples.reference_app.errors import AppError, store_unavailable
from examples.reference_app.players import Player, SessionError, SessionSigner
from examples.reference_app.settings import Settings
from examples.reference_app.store import FulfilmentStore
from svc.backend import AsyncBackendClient

T = TypeVar("T")


@dataclass
class AppContext:
    settings: Settings
    catalogue: Catalogue
    signer: SessionSigner
    store: FulfilmentStore | None = None
    backend_client: AsyncBackendClient | None = None

    @property
    def fulfilment(self) -> FulfilmentStore:
        assert self.store is not None, "the lifespan opens the store"
        return self.store

    def backend(self) -> AsyncBackendClient:
        if self.backend_client is None:
            raise AppError("backend_key_missing", 503, "SVC_API_KEY is not set on this "
                           "server, so it cannot call the payment API.")
        return self.backend_client

    def backend_key(self) -> str:
        if self.settings.api_key is None:
            raise AppError("backend_key_missing", 503, "SVC_API_KEY is not set on this "
                           "server, so it cannot verify a paymentProof.")
        return self.settings.api_key

    async def in_store(self, work: Callable[..., T], *args: Any) -> T:
        """Run a store call off the event loop; a store that is down is a 503."""
        try:
            return await run_in_threadpool(work, *args)
        except SQLAlchemyError as exc:
            raise store_unavailable(exc) from exc


def context_of(request: Request) -> AppContext:
    found: AppContext = request.app.state.context
    return found


def player_of(request: Request) -> Player:
    """The logged-in player of this request (``Authorization: Bearer <session>``)."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise AppError("login_required", 401, "Log in first.")
    try:
        return context_of(request).signer.read(token.strip())
    except SessionError as exc:
        raise AppError("login_required", 401, str(exc)) from None
