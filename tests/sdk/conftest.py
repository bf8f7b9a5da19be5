"""The paying world of tests/ledger, served with ``127.0.0.1:PORT`` as its API host so the
SDK's clients reach it by URL (``api.localhost`` does not resolve here), and the SDK's two
clients behind one fixture, so each test runs on the sync and on the async client."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from typing import Any, cast

import httpx
import pytest
from eth_account.signers.local import LocalAccount
from sqlalchemy.orm import Session, sessionmaker

from svc.backend import AsyncBackendClient, BackendClient
from tests.ledger.flow import PayWorld, add_product, build_world
from tests.support.router import RouterFactory
from tests.support.services import free_port

TRUSTED = {"trustedServerCharge": {"enabled": True, "maxAmountAtomic": "20000"}}


@dataclass
class SdkWorld(PayWorld):
    def api(self, **headers: str) -> httpx.Client:
        return httpx.Client(base_url=self.router.url, timeout=30, headers=headers)

    def paid_delivery(self, account: LocalAccount, key: str) -> dict[str, Any]:
        """A product-route payment of ``retry`` (the hosted-entry path); its 201 body."""
        summary_code = self.authorize(account, 1_000_000)["code"]
        code = self.payment_code(summary_code, "retry")
        with self.api(origin=self.audience) as api:
            paid = self.pay(api, account, "retry", code, key)
        assert paid.status_code == 201, paid.text
        body: dict[str, Any] = paid.json()
        return body


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[SdkWorld]:
    port = free_port()
    with start_router(bind_port=port, apps_port=port,
                      base_url=f"http://127.0.0.1:{port}") as router:
        base = build_world(router, sessions)
        world = SdkWorld(**{f.name: getattr(base, f.name) for f in fields(base)})
        add_product(world, {"slug": "boost", "name": "Boost", "priceAtomic": "10000",
                            "riskPolicy": TRUSTED})
        add_product(world, {"slug": "credits", "name": "Credits", "priceAtomic": "1000",
                            "pricing": "dynamic_order", "minAmountAtomic": "1000",
                            "maxAmountAtomic": "1000000", "riskPolicy": TRUSTED})
        add_product(world, {"slug": "relic", "name": "Relic", "priceAtomic": "10000",
                            "riskMode": "settled_first", "riskPolicy": TRUSTED})
        yield world


class AsyncDriven:
    """An :class:`AsyncBackendClient` driven on one event loop of its own, so one test
    body exercises both clients; every coroutine method runs to completion."""

    def __init__(self, client: AsyncBackendClient) -> None:
        self._loop = asyncio.new_event_loop()
        self._client = client

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not inspect.iscoroutinefunction(attribute):
            return attribute

        def run(*args: Any, **kwargs: Any) -> Any:
            return self._loop.run_until_complete(attribute(*args, **kwargs))
        return run

    def __repr__(self) -> str:
        return repr(self._client)

    def __enter__(self) -> AsyncDriven:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Closed by the fixture, on its loop, when the test ends."""

    def close(self) -> None:
        self._loop.run_until_complete(self._client.aclose())
        self._loop.close()


Connect = Callable[..., BackendClient]


@pytest.fixture(params=["sync", "async"])
def backend(request: pytest.FixtureRequest, world: SdkWorld) -> Iterator[Connect]:
    """``backend(url=None, key=None, **options)``: a client of the world's service (or of
    ``url``) with the world's key (or ``key``)."""
    closers: list[Callable[[], None]] = []

    def connect(url: str | None = None, key: str | None = None,
                **options: Any) -> BackendClient:
        url, key = url or world.router.url, key or world.api_key
        if request.param == "sync":
            client = BackendClient(url, key, **options)
            closers.append(client.close)
            return client
        driven = AsyncDriven(AsyncBackendClient(url, key, **options))
        closers.append(driven.close)
        return cast(BackendClient, driven)

    yield connect
    for close in closers:
        close()
