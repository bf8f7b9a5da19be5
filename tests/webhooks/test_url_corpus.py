"""Bad webhook URLs (spec 5.5): every rejection class, each refused at registration and
again by the dispatcher before it would connect, and nothing is ever contacted.

The service's policy is the production one (``allow_private_origins`` off). Names are
answered by a DNS server on loopback that the test controls: public DNS is the edge of the
world here, and its public answers (``93.184.216.34``) are mocked; the service never
connects to them (registration only resolves, and every send in this file is refused).
"None contacted" is proven by listening sockets on the loopback port every URL points at,
which record each connection they accept.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction, utcnow
from payments.developer.auth import limit_key
from payments.ids import IdPrefix, new_id
from payments.ledger.models import AttemptStatus
from payments.models import AllowlistStatus, App, DomainRequestStatus, RuntimeStatus
from payments.webhooks.models import WebhookEndpoint
from payments.webhooks.services import WebhookLimits
from payments.webhooks.signing_secrets import SecretBox
from tests.factories import add_developer, add_owned_app, open_console_session
from tests.support.dns import DnsServer, dns_server
from tests.support.router import RouterFactory, RunningRouter
from tests.support.services import free_port
from tests.webhooks.kit import FAST, attempts, enqueue_events, wait_until

SERVICE = "pay-service.dev"
PUBLIC = "93.184.216.34"  # a public address; answers carrying it are the mocked edge


@dataclass
class Listener:
    """Accepts and records every TCP connection on 127.0.0.1 and ::1 at one port."""

    port: int
    peers: list[str] = field(default_factory=list)


@contextmanager
def listener() -> Iterator[Listener]:
    port = free_port()
    found = Listener(port)
    sockets = []
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        with suppress(OSError):  # no IPv6 on this machine: IPv4 alone
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(64)
            sock.settimeout(0.1)
            sockets.append(sock)
    stop = threading.Event()

    def accept(sock: socket.socket) -> None:
        while not stop.is_set():
            try:
                conn, peer = sock.accept()
            except (TimeoutError, OSError):
                continue
            found.peers.append(str(peer))
            conn.close()

    threads = [threading.Thread(target=accept, args=(s,), daemon=True) for s in sockets]
    for t in threads:
        t.start()
    try:
        yield found
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=2)
        for s in sockets:
            s.close()


def corpus(port: int) -> list[tuple[str, str]]:
    """(url, expected rule). Every URL aims at the listener's port where a port is given."""
    p = port
    d = "shop-dev.com"
    return [
        # not https
        (f"http://hooks.{d}:{p}/svc", "https_required"),
        (f"ftp://hooks.{d}:{p}/svc", "https_required"),
        ("file:///etc/passwd", "https_required"),
        ("gopher://hooks.shop-dev.com/", "https_required"),
        ("javascript:alert(1)", "https_required"),
        ("data:text/plain,hi", "https_required"),
        (f"ws://hooks.{d}:{p}/svc", "https_required"),
        # localhost in its spellings
        (f"https://localhost:{p}/svc", "internal_name"),
        (f"https://LOCALHOST:{p}/svc", "internal_name"),
        (f"https://localhost.:{p}/svc", "internal_name"),
        (f"https://api.localhost:{p}/svc", "internal_name"),
        (f"https://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54:{p}/x", "internal_name"),
        # loopback, unspecified, private, link-local and metadata, CGNAT literals
        (f"https://127.0.0.1:{p}/svc", "private_address"),
        (f"https://127.1.2.3:{p}/svc", "private_address"),
        (f"https://[::1]:{p}/svc", "private_address"),
        (f"https://0.0.0.0:{p}/svc", "private_address"),
        (f"https://[::]:{p}/svc", "private_address"),
        (f"https://10.0.0.1:{p}/svc", "private_address"),
        (f"https://172.16.5.4:{p}/svc", "private_address"),
        (f"https://192.168.1.10:{p}/svc", "private_address"),
        (f"https://[fd12:3456::1]:{p}/svc", "private_address"),
        (f"https://169.254.169.254:{p}/latest/meta-data/", "private_address"),
        (f"https://169.254.170.2:{p}/v2/credentials", "private_address"),
        (f"https://[fe80::1]:{p}/svc", "private_address"),
        (f"https://100.64.0.1:{p}/svc", "private_address"),
        (f"https://100.127.255.254:{p}/svc", "private_address"),
        (f"https://[fd00:ec2::254]:{p}/svc", "private_address"),
        # IPv4 hidden in IPv6: mapped, 6to4, NAT64
        (f"https://[::ffff:127.0.0.1]:{p}/svc", "private_address"),
        (f"https://[::ffff:7f00:1]:{p}/svc", "private_address"),
        (f"https://[::ffff:169.254.169.254]:{p}/svc", "private_address"),
        (f"https://[::ffff:10.0.0.1]:{p}/svc", "private_address"),
        (f"https://[2002:7f00:1::]:{p}/svc", "private_address"),
        (f"https://[64:ff9b::7f00:1]:{p}/svc", "private_address"),
        # decimal, octal, hex and short IPv4 spellings
        (f"https://2130706433:{p}/svc", "ip_spelling"),
        (f"https://0x7f000001:{p}/svc", "ip_spelling"),
        (f"https://0177.0.0.1:{p}/svc", "ip_spelling"),
        (f"https://0x7f.0.0.1:{p}/svc", "ip_spelling"),
        (f"https://127.1:{p}/svc", "ip_spelling"),
        (f"https://017700000001:{p}/svc", "ip_spelling"),
        (f"https://127.0.0.01:{p}/svc", "ip_spelling"),
        (f"https://[::1%25lo]:{p}/svc", "ip_spelling"),
        # internal names
        (f"https://printer.local:{p}/svc", "internal_name"),
        (f"https://api.internal:{p}/svc", "internal_name"),
        (f"https://metadata.google.internal:{p}/computeMetadata/v1/", "internal_name"),
        (f"https://ip-10-0-0-1.ec2.internal:{p}/svc", "internal_name"),
        (f"https://router.home.arpa:{p}/svc", "internal_name"),
        (f"https://nas.lan:{p}/svc", "internal_name"),
        (f"https://wiki.corp:{p}/svc", "internal_name"),
        (f"https://billing:{p}/svc", "single_label"),
        (f"https://webhooks:{p}/svc", "single_label"),
        # the service's own hosts and other apps' runtime hosts
        (f"https://api.{SERVICE}/svc", "service_host"),
        (f"https://portal.{SERVICE}/x", "service_host"),
        (f"https://console.{SERVICE}/x", "service_host"),
        (f"https://docs.{SERVICE}/openapi.json", "service_host"),
        (f"https://launch.{SERVICE}/svc", "service_host"),  # the legacy launch host
        (f"https://apps.{SERVICE}/api/svc/webhook", "service_host"),
        (f"https://other.apps.{SERVICE}/api/svc/webhook", "other_app_host"),
        (f"https://game.apps.{SERVICE}/hooks", "apps_proxy_path"),
        (f"https://game.apps.{SERVICE}/api/svc/webhook", "runtime_not_active"),
        # credentials, fragments, shapes
        (f"https://user:secret@hooks.{d}:{p}/svc", "userinfo"),
        (f"https://hooks.{d}@127.0.0.1:{p}/svc", "userinfo"),
        (f"https://hooks.{d}:{p}/svc#frag", "malformed"),
        (f"https://hooks.{d}\\@127.0.0.1:{p}/svc", "malformed"),
        (f"https://hooks.{d}:0/svc", "malformed"),
        ("https://", "malformed"),
        ("not a url", "malformed"),
        (f"https://[::1:{p}/svc", "malformed"),
        ("https://hooks." + "a" * 2050 + ".com/", "malformed"),
        # names whose DNS answers are not all public
        (f"https://loop.{d}:{p}/svc", "resolves_private"),
        (f"https://ten.{d}:{p}/svc", "resolves_private"),
        (f"https://meta.{d}:{p}/svc", "resolves_private"),
        (f"https://mixed.{d}:{p}/svc", "resolves_private"),
        (f"https://v6loop.{d}:{p}/svc", "resolves_private"),
        (f"https://mapped.{d}:{p}/svc", "resolves_private"),
        (f"https://cgnat.{d}:{p}/svc", "resolves_private"),
        (f"https://nowhere.{d}:{p}/svc", "does_not_resolve"),
    ]


DNS_RECORDS = {
    "loop.shop-dev.com": ["127.0.0.1"], "ten.shop-dev.com": ["10.1.2.3"],
    "meta.shop-dev.com": ["169.254.169.254"], "mixed.shop-dev.com": [PUBLIC, "127.0.0.1"],
    "v6loop.shop-dev.com": ["::1"], "mapped.shop-dev.com": ["::ffff:127.0.0.1"],
    "cgnat.shop-dev.com": ["100.100.1.1"], "rebind.shop-dev.com": [PUBLIC],
    "hooks.shop-dev.com": [PUBLIC],
}


@dataclass
class Harness:
    router: RunningRouter
    sessions: sessionmaker[Session]
    dns: DnsServer
    org_id: str
    developer_id: str

    def forget_rate_limit(self) -> None:
        limiter = self.router.service.resources.rate_limiter()
        asyncio.run(limiter.reset(WebhookLimits().management, limit_key(self.developer_id)))

    def console(self) -> httpx.Client:
        cookie, csrf = open_console_session(self.sessions, self.developer_id)
        return httpx.Client(base_url=self.router.url, timeout=30, headers={
            "host": f"console.{SERVICE}:{self.router.port}", "x-csrf-token": csrf,
            "cookie": f"svc_console={cookie}"})


@pytest.fixture
def harness(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[Harness]:
    with dns_server(dict(DNS_RECORDS)) as dns:
        port = free_port()
        overrides = {
            **FAST, "bind_port": port, "allow_private_origins": False,
            "dns_server": f"{dns.host}:{dns.port}", "apps_domain": f"apps.{SERVICE}",
            "legacy_launch_host": f"launch.{SERVICE}",
            **{f"{n}_url": f"http://{h}.{SERVICE}:{port}"
               for n, h in (("base", "api"), ("portal", "portal"), ("console", "console"),
                            ("docs", "docs"))},
        }
        with start_router(**overrides) as router:
            developer_id, org_id = add_developer(sessions)
            add_owned_app(sessions, org_id, "game", pay_to="0x" + "ab" * 20,
                          recipient_allowlist_status=AllowlistStatus.ALLOWED)
            yield Harness(router, sessions, dns, org_id, developer_id)


def test_every_bad_url_is_refused_and_nothing_is_contacted(harness: Harness) -> None:
    with listener() as ears, harness.console() as client:
        cases = corpus(ears.port)
        assert len(cases) >= 50
        rules = set()
        for url, rule in cases:
            harness.forget_rate_limit()  # the limit is test_api's subject, not this one's
            answer = client.post("/api/developer/apps/game/webhooks", json={"url": url})
            assert answer.status_code == 422, (url, answer.text)
            body = answer.json()
            assert body["code"] == "webhook_url_invalid", (url, body)
            assert body["rule"] == rule, (url, body)
            assert body["field"] == "url"
            rules.add(rule)
        assert rules >= {"https_required", "internal_name", "private_address", "ip_spelling",
                         "single_label", "service_host", "other_app_host", "apps_proxy_path",
                         "runtime_not_active", "userinfo", "malformed", "resolves_private",
                         "does_not_resolve"}
        # Nothing was created, and the positive control passes: a public name is accepted.
        assert client.get("/api/developer/apps/game/webhooks").json()["webhooks"] == []
        harness.forget_rate_limit()
        accepted = client.post("/api/developer/apps/game/webhooks",
                               json={"url": f"https://hooks.shop-dev.com:{ears.port}/svc"})
        assert accepted.status_code == 201, accepted.text
    assert ears.peers == []


def test_dispatcher_refuses_bad_urls_that_bypassed_registration(harness: Harness) -> None:
    """Rows written straight into the database (an old rule, a manual edit): the dispatcher
    checks again before connecting and records the refusal instead of sending."""
    box = SecretBox(harness.router.settings.secret_key)
    with listener() as ears:
        cases = [(u, r) for u, r in corpus(ears.port)
                 if r not in ("does_not_resolve",) and len(u) < 2048]
        apps = []
        with transaction(harness.sessions) as session:
            for i, (url, _) in enumerate(cases):
                app = App(name=f"Bypass {i}", slug=f"bypass-{i}", organization_id=harness.org_id)
                session.add(app)
                session.flush()
                endpoint_id = new_id(IdPrefix.WEBHOOK)
                session.add(WebhookEndpoint(
                    id=endpoint_id, app_id=app.id, url=url, events=["payment.delivered"],
                    secret_sealed=box.seal("zwhsec_" + "0" * 64, endpoint_id),
                    secret_preview="zwhsec_…0000", secret_created_at=utcnow()))
                apps.append(app)
        for app in apps:
            enqueue_events(harness.sessions, app, 1)
        rows = attempts(harness.sessions)
        wait_until(lambda: all(a.attempt_count >= 1 for a in attempts(harness.sessions).values()),
                   timeout=30, what="one refused request per event")
        rows = attempts(harness.sessions)
        assert len(rows) == len(cases)
        for attempt in rows.values():
            assert attempt.response_status is None and not attempt.signed
            assert attempt.last_error is not None
            assert attempt.last_error.startswith("url_refused:"), attempt.last_error
    assert ears.peers == []


def test_dns_rebinding_between_registration_and_send(harness: Harness) -> None:
    """Public at registration (the mocked edge of the world), loopback at send time: the
    request is refused before any connection, and the attempt says why."""
    with listener() as ears, harness.console() as client:
        url = f"https://rebind.shop-dev.com:{ears.port}/svc"
        created = client.post("/api/developer/apps/game/webhooks", json={"url": url})
        assert created.status_code == 201, created.text
        harness.dns.records["rebind.shop-dev.com"] = ["127.0.0.1"]
        with harness.sessions() as session:
            app = session.scalars(select(App).where(App.slug == "game")).one()
        enqueue_events(harness.sessions, app, 3)
        wait_until(lambda: all(a.attempt_count >= 1 for a in attempts(harness.sessions).values()),
                   what="refused sends")
        for attempt in attempts(harness.sessions).values():
            assert attempt.status == AttemptStatus.PENDING  # retried later, as DNS may change
            assert attempt.last_error == "url_refused:resolves_private"
        # The name was asked again at send time, not taken from registration.
        assert sum(1 for name, _ in harness.dns.questions if name == "rebind.shop-dev.com") >= 4
    assert ears.peers == []


def test_runtime_proxy_url_accepted_once_the_same_app_is_served(harness: Harness) -> None:
    harness.dns.records[f"game.apps.{SERVICE}"] = [PUBLIC]
    with transaction(harness.sessions) as session:
        app = session.scalars(select(App).where(App.slug == "game")).one()
        app.runtime_status = RuntimeStatus.ACTIVE
        app.runtime_origin = "https://game.shop-dev.com"
        app.runtime_domain_request_status = DomainRequestStatus.PENDING_MANUAL_DNS
    with harness.console() as client:
        url = f"https://game.apps.{SERVICE}/api/svc/webhook"
        early = client.post("/api/developer/apps/game/webhooks", json={"url": url})
        assert early.status_code == 422, early.text
        assert early.json()["rule"] == "runtime_not_active"
        with transaction(harness.sessions) as session:
            app = session.scalars(select(App).where(App.slug == "game")).one()
            app.runtime_domain_request_status = DomainRequestStatus.APPROVED
        answer = client.post("/api/developer/apps/game/webhooks", json={"url": url})
        assert answer.status_code == 201, answer.text
        assert answer.json()["webhook"]["url"] == url
