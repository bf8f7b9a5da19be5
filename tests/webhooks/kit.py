"""A webhook world: the paying world of the ledger tests, a console session for the
webhook API, and a receiver on loopback that runs the reference receiver
(``examples/webhook_receiver.py``) behind a fault injector: it can answer 500, hang past
the dispatcher's timeout, or close the connection without answering."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx
from aiohttp import web
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from examples.webhook_receiver import FulfilmentLedger, WebhookReceiver
from payments.db import transaction, utcnow
from payments.ids import IdPrefix, new_id
from payments.ledger.models import AttemptStatus, WebhookAttempt, WebhookEvent
from payments.models import App
from payments.webhooks import outbox
from payments.webhooks.models import WebhookEndpoint
from payments.webhooks.signing_secrets import SecretBox
from tests.factories import open_console_session
from tests.ledger.flow import PayWorld, wallet
from tests.support.cli_grant import issue_grant
from tests.support.servers import AiohttpServer

# What the receiver does with one request.
OK, FAIL, HANG, CLOSE = "ok", "fail", "hang", "close"
Plan = Callable[[int, str], str]  # (request number overall, event id) -> action


@dataclass
class Received:
    event_id: str
    headers: dict[str, str]
    body: bytes
    action: str
    status: int | None  # what it answered (None: hung or closed)
    at: float  # when it ended (time.monotonic())
    started: float = 0.0  # when it arrived


@dataclass
class FaultyReceiver:
    """The reference receiver behind a fault injector, on an aiohttp server."""

    plan: Plan = lambda n, event: OK
    hang_seconds: float = 30.0
    delay: float = 0.0  # every request takes this long (overlaps become observable)
    secret: str = ""
    ledger: FulfilmentLedger = field(default_factory=FulfilmentLedger)
    requests: list[Received] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)  # event ids received twice at once
    _active: set[str] = field(default_factory=set)
    _count: itertools.count[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    server: AiohttpServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"{self.server.url}/api/svc/webhook"

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/api/svc/webhook", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        body = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        event_id = headers.get("x-svc-event-id", "")
        with self._lock:
            n = next(self._count)
            if event_id in self._active:
                self.overlaps.append(event_id)
            self._active.add(event_id)
        action = self.plan(n, event_id)
        status: int | None = None
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            if action == HANG:
                await asyncio.sleep(self.hang_seconds)
                status = 200
                return web.json_response({"late": True})
            if action == CLOSE:
                assert request.transport is not None
                request.transport.close()
                return web.Response(status=200)  # never written: the socket is gone
            if action == FAIL:
                status = 503
                return web.json_response({"error": "try later"}, status=503)
            answer = WebhookReceiver(self.secret, self.ledger).handle(body, headers)
            status = answer.status
            return web.json_response(answer.body, status=answer.status)
        finally:
            with self._lock:
                self._active.discard(event_id)
                self.requests.append(Received(event_id, headers, body, action, status,
                                              time.monotonic(), started))

    def delivered_ids(self) -> set[str]:
        with self._lock:
            return {r.event_id for r in self.requests if r.action == OK and r.status == 200}


@contextmanager
def receiver(plan: Plan | None = None, hang_seconds: float = 30.0) -> Iterator[FaultyReceiver]:
    faulty = FaultyReceiver(hang_seconds=hang_seconds)
    if plan is not None:
        faulty.plan = plan
    with AiohttpServer(faulty.app()) as server:
        faulty.server = server
        yield faulty


def console(world: PayWorld, developer_id: str) -> httpx.Client:
    cookie, csrf = open_console_session(world.sessions, developer_id)
    return httpx.Client(base_url=world.router.url, timeout=30, headers={
        "host": f"console.localhost:{world.router.port}", "x-csrf-token": csrf,
        "cookie": f"svc_console={cookie}"})


def developer_of(world: PayWorld) -> str:
    from payments.developer.models import Developer
    with world.sessions() as session:
        dev = session.scalars(select(Developer)).first()
        assert dev is not None
        return dev.id


def create_endpoint(client: httpx.Client, app: str, url: str,
                    events: list[str] | None = None) -> tuple[dict[str, Any], str]:
    body: dict[str, Any] = {"url": url}
    if events is not None:
        body["events"] = events
    answer = client.post(f"/api/developer/apps/{app}/webhooks", json=body)
    assert answer.status_code == 201, answer.text
    data = answer.json()
    return data["webhook"], data["secret"]


def pay(world: PayWorld, count: int, product: str = "retry", seed: int = 1) -> list[str]:
    """``count`` real product-route payments by one wallet; their delivery ids."""
    account = wallet(seed)
    summary = world.authorize(account, 10_000_000)["code"]
    ids = []
    with world.api(origin=world.audience) as client:
        for i in range(count):
            code = world.payment_code(summary, product)
            answer = world.pay(client, account, product, code, f"k-{seed}-{i}")
            assert answer.status_code == 201, answer.text
            ids.append(answer.json()["deliveryId"])
    return ids


def enqueue_events(sessions: sessionmaker[Session], app: App, count: int) -> list[str]:
    """``count`` payment.delivered-shaped events written straight into the outbox (the same
    rows the ledger writes), for tests about the dispatcher rather than the ledger."""
    ids = []
    with transaction(sessions) as session:
        now = utcnow()
        for _ in range(count):
            event_id = new_id(IdPrefix.EVENT)
            payload = {
                "id": event_id, "type": "payment.delivered", "test": False,
                "createdAt": now.isoformat().replace("+00:00", "Z"),
                "app": {"id": app.id, "slug": app.slug, "name": app.name},
                "product": {"id": "zprod_x", "slug": "x", "name": "X", "priceAtomic": "10000",
                            "currency": "USDC", "network": "local"},
                "payment": {"mode": "budget-spender", "settlementStatus": "queued"},
                "delivery": {"deliveryId": f"ztdlv_bulk{event_id[5:]}",
                             "idempotencyKey": f"svc:bulk-{event_id}", "status": "delivered",
                             "fulfilled": False},
            }
            outbox.enqueue(session, app.id, "payment.delivered", payload, None, now)
            ids.append(event_id)
    return ids


def attempts(sessions: sessionmaker[Session]) -> dict[str, WebhookAttempt]:
    """Every outbox row by event id."""
    with sessions() as session:
        return {a.event_id: a for a in session.scalars(select(WebhookAttempt))}


def events(sessions: sessionmaker[Session]) -> list[WebhookEvent]:
    with sessions() as session:
        return list(session.scalars(select(WebhookEvent).order_by(WebhookEvent.created_at)))


def wait_until(condition: Callable[[], bool], timeout: float = 30.0,
               what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def all_settled(sessions: sessionmaker[Session]) -> Callable[[], bool]:
    """No attempt is pending any more."""
    def check() -> bool:
        return all(a.status != AttemptStatus.PENDING for a in attempts(sessions).values())
    return check


FAST: dict[str, Any] = {"webhook_workers": True, "webhook_poll_interval": 0.05,
        "webhook_retry_delays": (0.05, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1),
        "webhook_timeout": 1.0, "webhook_lease_seconds": 11.0}
LEASE = timedelta(seconds=11)


def grant_token(sessions: sessionmaker[Session], developer_id: str, app_slug: str,
                scopes: list[str]) -> str:
    """A CLI grant's token for ``app_slug`` (the device flow's own functions, without HTTP)."""
    return issue_grant(sessions, developer_id, app_slug, scopes).token


def api_client(world: PayWorld, token: str) -> httpx.Client:
    return httpx.Client(base_url=world.router.url, timeout=30, headers={
        "host": f"api.localhost:{world.router.port}", "authorization": f"Bearer {token}"})


def app_with_endpoint(sessions: sessionmaker[Session], slug: str, url: str, secret: str,
                      server_secret: str) -> App:
    """An app whose endpoint (``url``, ``payment.delivered``) signs with ``secret``, sealed
    as a server with ``server_secret`` would seal it: for dispatchers in other processes."""
    with transaction(sessions) as session:
        app = App(name=slug.title(), slug=slug)
        session.add(app)
        session.flush()
        endpoint_id = new_id(IdPrefix.WEBHOOK)
        session.add(WebhookEndpoint(
            id=endpoint_id, app_id=app.id, url=url, events=["payment.delivered"],
            secret_sealed=SecretBox(server_secret).seal(secret, endpoint_id),
            secret_preview=f"zwhsec_…{secret[-4:]}", secret_created_at=utcnow()))
    return app
