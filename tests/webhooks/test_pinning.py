"""Where a webhook request goes: to an address checked for that very request, and nowhere
else. The connection is pinned to the address the DNS check returned at send time (``Host``
and TLS SNI still carry the name), and a redirect is an answer like any other, never followed.

Names are answered by a DNS server on loopback that the test controls (the edge of the
world); settings are dev ones, so loopback answers are allowed. The dispatcher is the
production one (``make_dispatcher``) given the test CA instead of the system trust store.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

import httpx
import pytest
import trustme
from aiohttp import web
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.ledger.models import AttemptStatus
from payments.models import App
from payments.webhooks.models import WebhookTry
from router.settings import Settings
from router.webhooks import make_dispatcher
from tests.factories import add_developer, add_owned_app, open_console_session
from tests.manifest.origin import client_context, server_context
from tests.support.dns import DnsServer, dns_server
from tests.support.router import RouterFactory, RunningRouter
from tests.support.servers import AiohttpServer
from tests.webhooks.kit import FaultyReceiver, attempts, enqueue_events, wait_until
from tests.webhooks.test_url_corpus import listener

RETRY_AFTER = 30.0  # the first retry's delay: long enough that a test sees one request only
# Known only to the test's DNS server; a fresh label so no real zone can answer it.
NAME = "hooks-pin-7f3a9c.example.com"
RECEIVER_IP = "127.0.0.2"  # not 127.0.0.1: nothing reaches it by accident
DECOY_IP = "127.0.0.3"


@dataclass
class Harness:
    router: RunningRouter
    sessions: sessionmaker[Session]
    dns: DnsServer
    developer_id: str
    app: App

    def console(self) -> httpx.Client:
        cookie, csrf = open_console_session(self.sessions, self.developer_id)
        return httpx.Client(base_url=self.router.url, timeout=30, headers={
            "host": f"console.localhost:{self.router.port}", "x-csrf-token": csrf,
            "cookie": f"svc_console={cookie}"})

    def register(self, url: str) -> str:
        """The endpoint through the console API; its signing secret."""
        with self.console() as client:
            answer = client.post(f"/api/developer/apps/{self.app.slug}/webhooks",
                                 json={"url": url})
        assert answer.status_code == 201, answer.text
        secret: str = answer.json()["secret"]
        return secret


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def harness(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[Harness]:
    # The in-server dispatcher stays off: it trusts the system store, not the test CA.
    settings = {"webhook_workers": False, "webhook_retry_delays": (RETRY_AFTER,),
                "webhook_timeout": 2.0, "webhook_lease_seconds": 12.0,
                "webhook_poll_interval": 0.05}
    with dns_server() as dns, \
            start_router(dns_server=f"{dns.host}:{dns.port}", **settings) as router:
        developer_id, org_id = add_developer(sessions)
        app = add_owned_app(sessions, org_id, "game")
        yield Harness(router, sessions, dns, developer_id, app)


@contextmanager
def dispatching(settings: Settings, sessions: sessionmaker[Session],
                ca: trustme.CA) -> Iterator[None]:
    """The production dispatcher on its own thread and loop, trusting ``ca``."""
    dispatcher = make_dispatcher(settings, sessions, client_context(ca))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True, name="test-dispatcher")
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(dispatcher.start(), loop).result(10)
        try:
            yield
        finally:
            asyncio.run_coroutine_threadsafe(dispatcher.stop(), loop).result(30)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


@contextmanager
def decoy(host: str, port: int) -> Iterator[Callable[[], bool]]:
    """A socket listening at ``host:port`` that never accepts; yields "was it connected to?"
    (the kernel queues every connection, so a non-blocking accept finds any there was)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, port))
        sock.listen(8)
        sock.setblocking(False)

        def contacted() -> bool:
            try:
                conn, _ = sock.accept()
            except BlockingIOError:
                return False
            conn.close()
            return True

        yield contacted


def system_addresses(name: str) -> set[str]:
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(name, 443)}
    except socket.gaierror:
        return set()


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def test_connection_goes_to_the_address_checked_at_send_time(harness: Harness,
                                                             ca: trustme.CA) -> None:
    # The premise: the name leads to the receiver only through the checked DNS answer.
    assert RECEIVER_IP not in system_addresses(NAME)
    hook = FaultyReceiver()
    accepted_on: list[str] = []
    server_names: list[str | None] = []

    @web.middleware
    async def record_socket(request: web.Request, handler: Handler) -> web.StreamResponse:
        assert request.transport is not None
        accepted_on.append(request.transport.get_extra_info("sockname")[0])
        return await handler(request)

    app = hook.app()
    app.middlewares.append(record_socket)
    # The certificate names the host only, not an address: the client must verify the name.
    context = server_context(ca, NAME)
    context.sni_callback = lambda _conn, name, _ctx: server_names.append(name)
    with AiohttpServer(app, host=RECEIVER_IP, ssl_context=context) as server, \
            decoy(DECOY_IP, server.port) as decoy_contacted:
        hook.server = server
        url = f"https://{NAME}:{server.port}/api/svc/webhook"
        # Registered while the name pointed at the decoy; it points at the receiver by the
        # time the event is sent.
        harness.dns.records[NAME] = [DECOY_IP]
        hook.secret = harness.register(url)
        harness.dns.records[NAME] = [RECEIVER_IP]
        asked_at_registration = harness.dns.questions.count((NAME, "A"))
        [event_id] = enqueue_events(harness.sessions, harness.app, 1)
        with dispatching(harness.router.settings, harness.sessions, ca):
            wait_until(lambda: attempts(harness.sessions)[event_id].attempt_count >= 1,
                       timeout=8, what="the request")
        attempt = attempts(harness.sessions)[event_id]
        assert attempt.status == AttemptStatus.DELIVERED, attempt.last_error
        assert attempt.response_status == 200
        assert harness.dns.questions.count((NAME, "A")) > asked_at_registration
        assert not decoy_contacted()
    assert [(r.event_id, r.status) for r in hook.requests] == [(event_id, 200)]  # signed right
    assert hook.requests[0].headers["host"] == f"{NAME}:{server.port}"
    assert server_names == [NAME]
    assert accepted_on == [RECEIVER_IP]


@pytest.mark.parametrize("status", [302, 307])
def test_redirects_are_not_followed(harness: Harness, ca: trustme.CA, status: int) -> None:
    """The receiver redirects to another loopback server the policy would allow: the
    request is not sent there; the redirect is recorded as the answer and retried later."""
    seen: list[str] = []
    with listener() as ears:
        target = f"http://127.0.0.1:{ears.port}/svc"

        async def redirect(request: web.Request) -> web.StreamResponse:
            seen.append(request.path)
            return web.Response(status=status, headers={"Location": target})

        app = web.Application()
        app.router.add_post("/hook", redirect)
        with AiohttpServer(app) as server:
            harness.register(f"{server.url}/hook")
            [event_id] = enqueue_events(harness.sessions, harness.app, 1)
            with dispatching(harness.router.settings, harness.sessions, ca):
                wait_until(lambda: attempts(harness.sessions)[event_id].attempt_count >= 1,
                           timeout=8, what="the request")
            attempt = attempts(harness.sessions)[event_id]
            with harness.sessions() as session:
                tries = session.scalars(select(WebhookTry)).all()
    assert ears.peers == []
    assert seen == ["/hook"]
    assert attempt.status == AttemptStatus.PENDING
    assert attempt.response_status == status
    assert attempt.signed and attempt.last_error is None and attempt.delivered_at is None
    [sent] = tries
    assert (sent.number, sent.response_status, sent.error) == (1, status, None)
    wait = attempt.next_attempt_at - sent.sent_at
    assert timedelta(seconds=RETRY_AFTER) <= wait < timedelta(seconds=RETRY_AFTER + 5)
