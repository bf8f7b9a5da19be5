"""The reference app against the real service: a router with the paying world of the
ledger tests (app ``game``), the reference app on its own loopback port as the app's
runtime origin (active, domain approved, so the router serves it on
``game.apps.localhost``), and its webhook registered with the real dispatcher.

The API host is ``127.0.0.1:PORT`` so the app's SDK client reaches it by URL (Python does
not resolve ``*.localhost``; the browser does, for the portal and the runtime host).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx
import uvicorn
from eth_account.signers.local import LocalAccount
from sqlalchemy.orm import Session, sessionmaker
from starlette.applications import Starlette

from examples.reference_app import Settings, create_app
from examples.reference_app.catalogue import Catalogue, Item
from examples.reference_app.store import FulfilmentStore, Grant, engine_for
from payments.models import DomainRequestStatus, RuntimeStatus
from svc.service_urls import ServiceUrls
from svc.webhooks import sign_webhook
from tests.factories import update_app
from tests.ledger.flow import PAY_TO, PayWorld, add_product, build_world, wallet
from tests.sdk.proxy import OnResponse, running_proxy
from tests.support.router import RouterFactory
from tests.support.services import free_port
from tests.webhooks.kit import FAST, console, create_endpoint, developer_of

PLAYER = "Player One"
PLAYER_ID = "player-one"
T = TypeVar("T")
TRUSTED = {"trustedServerCharge": {"enabled": True, "maxAmountAtomic": "50000"}}


class AppServer:
    """The reference app under uvicorn on a fixed loopback port; stop and start it again
    on the same port (a killed and restarted app)."""

    def __init__(self, app: Starlette, port: int) -> None:
        self.app = app
        self.port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port,
                                               log_level="warning", access_log=False,
                                               lifespan="on"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 15
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the reference app did not start")
            time.sleep(0.01)
        self._server, self._thread = server, thread

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=15)
        self._server = self._thread = None


@dataclass
class RefWorld(PayWorld):
    settings: Settings | None = None
    server: AppServer | None = None
    hook_secret: str = ""
    webhook_id: str = ""

    def api(self, **headers: str) -> httpx.Client:
        return httpx.Client(base_url=self.router.url, timeout=30, headers=headers)

    @property
    def config(self) -> Settings:
        assert self.settings is not None
        return self.settings

    @property
    def origin(self) -> str:
        return self.config.runtime_origin

    @property
    def runtime(self) -> str:
        return self.router.settings.runtime_url(self.app.slug)

    def app_client(self, token: str | None = None) -> httpx.Client:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.origin, timeout=30, headers=headers)

    def log_in(self, name: str = PLAYER) -> str:
        with self.app_client() as client:
            answer = client.post("/api/session", json={"name": name})
        assert answer.status_code == 200, answer.text
        token: str = answer.json()["token"]
        return token

    def developer(self) -> httpx.Client:
        """The console session of the app's developer (webhook API)."""
        return console(self, developer_of(self))

    def store(self) -> FulfilmentStore:
        return FulfilmentStore(engine_for(self.config.database_url))

    def grants(self, user: str = PLAYER_ID) -> list[Grant]:
        store = self.store()
        try:
            return store.grants_of(user)
        finally:
            store.engine.dispose()

    def restart_app(self) -> None:
        assert self.server is not None
        self.server.stop()
        self.server.start()


def catalogue_of(world: PayWorld) -> Catalogue:
    return Catalogue(Item(p.slug, p.name, p.price_atomic, p.id)
                     for p in world.products.values() if p.slug != "tip")


@contextmanager
def reference_world(start_router: RouterFactory, sessions: sessionmaker[Session],
                    store_url: str, *, events: list[str] | None = None,
                    api_proxy: OnResponse | None = None,
                    **overrides: Any) -> Iterator[RefWorld]:
    """The world, the reference app started (its store at ``store_url``); with
    ``api_proxy`` the app reaches the API through a loopback proxy that can change the
    service's answers (tests/sdk/proxy.py)."""
    port = free_port()
    settings_overrides = {**FAST, **overrides}
    hosts = {"base_url": f"http://127.0.0.1:{port}",
             "portal_url": f"http://portal.localhost:{port}",
             "console_url": f"http://console.localhost:{port}",
             "docs_url": f"http://docs.localhost:{port}"}
    with start_router(bind_port=port, apps_port=port, **hosts,
                      **settings_overrides) as router:
        base = build_world(router, sessions)
        world = RefWorld(**{f.name: getattr(base, f.name) for f in fields(base)})
        add_product(world, {"slug": "gem", "name": "Gem", "priceAtomic": "20000",
                            "riskPolicy": TRUSTED})
        add_product(world, {"slug": "relic", "name": "Relic", "priceAtomic": "20000",
                            "riskMode": "settled_first", "riskPolicy": TRUSTED})
        app_port = free_port()
        origin = f"http://127.0.0.1:{app_port}"
        update_app(sessions, world.app.slug, runtime_origin=origin,
                   runtime_status=RuntimeStatus.ACTIVE,
                   runtime_domain_request_status=DomainRequestStatus.APPROVED)
        # localhost, not 127.0.0.1: that address is the service's own API host here.
        webhook_url = f"http://localhost:{app_port}/api/svc/webhook"
        with world.developer() as developer:
            hook, secret = create_endpoint(developer, world.app.slug, webhook_url,
                                           events or ["payment.delivered", "payment.settled"])
        world.hook_secret, world.webhook_id = secret, hook["id"]
        runtime = router.settings.runtime_url(world.app.slug)
        stack = ExitStack()
        api_url = router.settings.base_url
        if api_proxy is not None:
            api_url = stack.enter_context(running_proxy(router.port, api_proxy)).url
        world.settings = Settings(
            app_id=world.app.id, app_slug=world.app.slug, pay_to=PAY_TO,
            runtime_origin=origin, return_url=f"{runtime}/svc-auth-return?app=game",
            webhook_secret=secret, webhook_url=webhook_url, api_key=world.api_key,
            database_url=store_url,
            service=ServiceUrls(api_url=api_url,
                                portal_url=router.settings.portal_url))
        world.server = AppServer(create_app(world.settings, catalogue=catalogue_of(world)),
                                 app_port)
        world.server.start()
        try:
            yield world
        finally:
            world.server.stop()
            stack.close()


def disable_webhook(world: RefWorld, enabled: bool = False) -> None:
    """Hold the app's webhook back (or let it through again): a late or failing one."""
    with world.developer() as developer:
        developer.patch(f"/api/developer/apps/game/webhooks/{world.webhook_id}",
                        json={"enabled": enabled}).raise_for_status()


def sqlite_store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'reference-app.db'}"


@dataclass
class Payer:
    """A wallet with a budget paying through the product route (the hosted-entry path),
    as the player ``user``."""

    world: RefWorld
    account: LocalAccount
    summary: str

    def pay(self, product: str, key: str, user: str = PLAYER_ID) -> dict[str, Any]:
        code = self.world.payment_code(self.summary, product, developerUserId=user,
                                       idempotencyKey=key)
        with self.world.api(origin=self.world.audience) as api:
            paid = self.world.pay(api, self.account, product, code, key,
                                  developerUserId=user)
        assert paid.status_code == 201, paid.text
        body: dict[str, Any] = paid.json()
        return body


def payer(world: RefWorld, seed: int, value: int = 1_000_000) -> Payer:
    account = wallet(seed)
    return Payer(world, account, world.authorize(account, value)["code"])


def signed_headers(body: bytes, secret: str, event: str = "payment.delivered"
                   ) -> dict[str, str]:
    timestamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"content-type": "application/json", "x-svc-event": event,
            "x-svc-timestamp": timestamp,
            "x-svc-signature": sign_webhook(body, timestamp, secret)}


def wait_for_value(read: Callable[[], T | None], what: str, timeout: float = 30.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
