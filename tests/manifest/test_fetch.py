"""Runtime verification against real HTTPS origins on loopback (certificates from a test CA).

Loopback origins are allowed only with the dev/local switch (``allow_loopback``): these tests
run with it on to reach their servers, and prove separately that with it off nothing is
contacted. Names are answered by a DNS server on loopback, standing in for public DNS.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import trustme
from aiohttp import web

from manifest.fetch import Answer, FetchFailed, FetchLimits, OriginClient
from manifest.rules import Expected
from manifest.url_policy import DnsResolver, UrlPolicy
from manifest.verify import Report, verify_runtime
from tests.manifest.origin import PAY_TO, DeveloperOrigin, client_context, good_manifest
from tests.support.dns import DnsServer, dns_server

APP_ID = "zapp_0123456789abcdef0123456789abcd"
POLICY = UrlPolicy(service_hosts=frozenset({"api.localhost", "portal.localhost"}),
                   apps_domain="apps.localhost", allow_loopback=True)
STRICT = UrlPolicy(service_hosts=POLICY.service_hosts, apps_domain="apps.localhost",
                   allow_loopback=False)


@pytest.fixture
def dns() -> Iterator[DnsServer]:
    with dns_server({"origin.example.com": ["127.0.0.1"],
                     "wrong-name.example.com": ["127.0.0.1"],
                     "private.example.com": ["10.1.2.3"]}) as server:
        yield server


def client(ca: trustme.CA | None, dns: DnsServer | None = None, policy: UrlPolicy = POLICY,
           **limits: float) -> OriginClient:
    resolver = DnsResolver(dns.host, dns.port, timeout=1) if dns else DnsResolver(
        "127.0.0.1", 9, timeout=0.5)
    context = client_context(ca) if ca is not None else ssl.create_default_context()
    return OriginClient(policy, resolver, context, FetchLimits(**limits))  # type: ignore[arg-type]


def expected(origin: str, **changes: str) -> Expected:
    values = {"app_id": APP_ID, "slug": "space", "pay_to": PAY_TO, "app_path": "/",
              "entry_path": "/", "runtime_origin": origin, **changes}
    return Expected(**values)


def failures(report: Report) -> dict[str, str]:
    return {c.id: c.seen or "" for c in report.failed}


def test_good_origin_passes_with_every_request_pinned(origin: DeveloperOrigin,
                                                       ca: trustme.CA) -> None:
    origin.manifest = good_manifest(APP_ID, "space", runtimeOrigin=origin.url)
    report = verify_runtime(origin.url, expected(origin.url), client(ca))
    assert report.passed, failures(report)
    assert [c.id for c in report.checks] == [
        "origin", "manifest_fetch", "manifest_json", "appId", "slug", "payTo", "webhookPath",
        "paymentSubmittedPath", "appPath", "entryPath", "runtimeOrigin", "webhook_probe",
        "payment_submitted_probe"]
    assert [(r.method, r.path) for r in origin.requests] == [
        ("GET", "/.well-known/svc.json"), ("POST", "/api/svc/webhook"),
        ("POST", "/api/svc/payment-submitted")]
    probe = origin.requests[1]
    assert "X-Svc-Signature" not in probe.headers  # unsigned, on purpose
    assert probe.headers["User-Agent"].startswith("svc-runtime-verifier/")


def test_a_manifest_without_paths_verifies_when_the_saved_paths_are_the_root(
        origin: DeveloperOrigin, ca: trustme.CA) -> None:
    """Spec 2.8: appPath and entryPath default to "/"; a runtime whose manifest leaves them
    out becomes active at the root, and only there."""
    origin.manifest = good_manifest(APP_ID, "space")
    del origin.manifest["appPath"], origin.manifest["entryPath"]
    report = verify_runtime(origin.url, expected(origin.url), client(ca))
    assert report.passed, failures(report)
    elsewhere = verify_runtime(origin.url, expected(origin.url, app_path="/play"), client(ca))
    assert [c.id for c in elsewhere.failed] == ["appPath"]


def test_a_name_is_resolved_once_and_the_connection_pinned(
    ca: trustme.CA, dns: DnsServer, origin: DeveloperOrigin,
) -> None:
    url = f"https://origin.example.com:{origin.port}"
    origin.manifest = good_manifest(APP_ID, "space", runtimeOrigin=url)
    report = verify_runtime(url, expected(url), client(ca, dns))
    assert report.passed, failures(report)
    # Host (and SNI: the certificate is checked against the name) are the name, while the
    # socket went to the address the policy checked.
    assert {r.headers["Host"] for r in origin.requests} == {f"origin.example.com:{origin.port}"}
    assert ("origin.example.com", "A") in dns.questions


LOCAL_RULE = ("the origin is on a loopback or private address, admitted only in dev "
              "(SVCSRV_ALLOW_PRIVATE_ORIGINS); production needs a developer-owned public HTTPS "
              "origin")


@pytest.mark.parametrize("named", [False, True])
def test_a_loopback_origin_is_not_called_public(origin: DeveloperOrigin, ca: trustme.CA,
                                                 dns: DnsServer, named: bool) -> None:
    """The dev switch admitted it: by its address literal, or by where its name resolved."""
    url = f"https://origin.example.com:{origin.port}" if named else origin.url
    origin.manifest = good_manifest(APP_ID, "space", runtimeOrigin=url)
    report = verify_runtime(url, expected(url), client(ca, dns))
    assert report.passed, failures(report)
    assert (report.checks[0].id, report.checks[0].rule) == ("origin", LOCAL_RULE)
    assert "public HTTPS origin" not in report.checks[0].rule.split(";")[0]


@pytest.mark.parametrize(("url", "rule"), [
    ("http://127.0.0.1:9", LOCAL_RULE), ("http://localhost:9", LOCAL_RULE),
    ("http://192.168.1.20:9", LOCAL_RULE),
    ("https://origin.example.com:9", "the origin is a developer-owned public HTTPS origin"),
])
def test_the_origin_rule_holds_when_the_manifest_cannot_be_fetched(url: str, rule: str) -> None:
    class Unreachable(OriginClient):
        def request(self, *args: Any, **kwargs: Any) -> Answer:
            raise FetchFailed("connect", "connection refused")
    report = verify_runtime(url, expected(url), Unreachable(POLICY, DnsResolver("127.0.0.1", 9),
                                                              ssl.create_default_context()))
    assert [(c.id, c.passed) for c in report.checks] == [("origin", True),
                                                          ("manifest_fetch", False)]
    assert report.checks[0].rule == rule


def test_a_public_address_keeps_the_public_origin_rule() -> None:
    class Public(OriginClient):
        def request(self, *args: Any, **kwargs: Any) -> Answer:
            return Answer(404, (), b"", "/.well-known/svc.json", "93.184.216.34")
    url = "https://origin.example.com"
    report = verify_runtime(url, expected(url), Public(STRICT, DnsResolver("127.0.0.1", 9),
                                                         ssl.create_default_context()))
    assert report.checks[0].rule == "the origin is a developer-owned public HTTPS origin"
    assert report.checks[0].passed


def test_certificate_from_an_unknown_ca_fails(origin: DeveloperOrigin) -> None:
    origin.manifest = good_manifest(APP_ID, "space")
    report = verify_runtime(origin.url, expected(origin.url), client(None))
    assert report.failed[0].id == "manifest_fetch"
    assert "certificate" in report.failed[0].seen  # type: ignore[operator]
    assert "valid certificate" in report.failed[0].fix
    assert origin.requests == []


def test_certificate_for_another_name_fails(origin: DeveloperOrigin, ca: trustme.CA,
                                            dns: DnsServer) -> None:
    url = f"https://wrong-name.example.com:{origin.port}"
    report = verify_runtime(url, expected(url), client(ca, dns))
    assert failures(report)["manifest_fetch"].startswith(
        "the certificate is not valid for wrong-name.example.com")


def test_not_json(origin: DeveloperOrigin, ca: trustme.CA) -> None:
    async def html(request: web.Request) -> web.Response:
        return web.Response(text="<html>hello</html>", content_type="text/html")
    origin.handler = html
    report = verify_runtime(origin.url, expected(origin.url), client(ca))
    assert list(failures(report)) == ["manifest_json"]
    assert "text/html" in failures(report)["manifest_json"]
    # The probes still ran: the developer learns everything in one verification.
    assert [c.id for c in report.checks][-2:] == ["webhook_probe", "payment_submitted_probe"]


def test_manifest_missing(origin: DeveloperOrigin, ca: trustme.CA) -> None:
    async def missing(request: web.Request) -> web.Response:
        return web.Response(status=404)
    origin.handler = missing
    report = verify_runtime(origin.url, expected(origin.url), client(ca))
    assert failures(report) == {"manifest_fetch": "HTTP 404"}


@pytest.mark.parametrize("chunked", [False, True])
def test_huge_bodies_are_refused(origin: DeveloperOrigin, ca: trustme.CA,
                                 chunked: bool) -> None:
    async def huge(request: web.Request) -> web.StreamResponse:
        if not chunked:
            return web.Response(body=b"{" + b" " * 5_000_000 + b"}",
                                content_type="application/json")
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            for _ in range(500):
                await response.write(b" " * 10_000)
        except (ConnectionResetError, OSError):
            pass
        return response
    origin.handler = huge
    started = time.monotonic()
    report = verify_runtime(origin.url, expected(origin.url),
                            client(ca, max_body_bytes=64 * 1024))
    seen = failures(report)["manifest_fetch"]
    assert ("over 65536 bytes" in seen) if chunked else ("declares 5000002 bytes" in seen)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("drip", [False, True])
def test_slow_answers_time_out(origin: DeveloperOrigin, ca: trustme.CA, drip: bool) -> None:
    async def slow(request: web.Request) -> web.StreamResponse:
        if not drip:
            await asyncio.sleep(2.5)
            return web.json_response({})
        # Every byte arrives well within any per-read timeout; only a deadline stops this.
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            for _ in range(100):
                await response.write(b" ")
                await asyncio.sleep(0.05)
        except (ConnectionResetError, OSError):
            pass
        return response
    origin.handler = slow
    started = time.monotonic()
    report = verify_runtime(origin.url, expected(origin.url), client(ca, timeout=1.0))
    elapsed = time.monotonic() - started
    assert failures(report) == {"manifest_fetch": "no complete answer within 1 s"}
    assert report.failed[0].fix.startswith("Serve the manifest faster")
    assert 0.9 < elapsed < 2.5  # one deadline, and the probes were skipped


def test_same_origin_redirects_are_followed(origin: DeveloperOrigin, ca: trustme.CA) -> None:
    async def moved(request: web.Request) -> web.Response:
        if request.query.get("hop") == "2":
            return web.json_response(good_manifest(APP_ID, "space"))
        hop = int(request.query.get("hop", "0")) + 1
        raise web.HTTPFound(f"/.well-known/svc.json?hop={hop}")
    origin.handler = moved
    report = verify_runtime(origin.url, expected(origin.url), client(ca))
    assert report.passed, failures(report)
    assert origin.paths()[:3] == ["/.well-known/svc.json", "/.well-known/svc.json?hop=1",
                                  "/.well-known/svc.json?hop=2"]


def test_redirect_loops_stop(origin: DeveloperOrigin, ca: trustme.CA) -> None:
    async def loop(request: web.Request) -> web.Response:
        raise web.HTTPFound("/.well-known/svc.json")
    origin.handler = loop
    report = verify_runtime(origin.url, expected(origin.url), client(ca))
    assert failures(report) == {"manifest_fetch": "more than 3 redirects"}
    assert len(origin.requests) == 4


class Listener:
    """A socket that only records who connects: proof that nothing was contacted."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    recorder = Listener()
    yield recorder
    recorder.close()


@pytest.mark.parametrize("target", [
    "http://169.254.169.254/latest/meta-data/", "https://10.0.0.5/svc.json",
    "http://[::1]:{port}/", "https://127.0.0.1:{port}/.well-known/svc.json",
    "http://127.0.0.1:{origin_port}/.well-known/svc.json",  # same host, other scheme
    "//127.0.0.1:{port}/x", "https://origin.example.com:{origin_port}/.well-known/svc.json",
])
def test_redirects_off_the_origin_are_refused_uncontacted(
    origin: DeveloperOrigin, ca: trustme.CA, listener: Listener, target: str,
) -> None:
    location = target.format(port=listener.port, origin_port=origin.port)

    async def away(request: web.Request) -> web.Response:
        raise web.HTTPFound(location)
    origin.handler = away
    report = verify_runtime(origin.url, expected(origin.url), client(ca))
    assert failures(report)["manifest_fetch"].startswith("redirected off the origin")
    assert "within the origin" in report.failed[0].fix
    assert listener.connections == 0
    assert origin.paths()[0] == "/.well-known/svc.json"


@pytest.mark.parametrize(("route", "status", "passes"), [
    ("webhook", 401, True), ("webhook", 403, False), ("webhook", 404, False),
    ("webhook", 405, False), ("webhook", 200, False), ("webhook", 204, False),
    ("webhook", 500, False), ("webhook", 302, False), ("webhook", 400, False),
    ("payment_submitted", 401, True), ("payment_submitted", 400, True),
    ("payment_submitted", 422, True), ("payment_submitted", 404, False),
    ("payment_submitted", 200, False), ("payment_submitted", 503, False),
])
def test_probes_tell_real_routes_from_missing_ones(
    origin: DeveloperOrigin, ca: trustme.CA, route: str, status: int, passes: bool,
) -> None:
    origin.manifest = good_manifest(APP_ID, "space")
    setattr(origin, f"{route}_status", status)
    report = verify_runtime(origin.url, expected(origin.url), client(ca))
    check = {c.id: c for c in report.checks}[f"{route}_probe"]
    assert check.passed is passes
    assert check.seen == f"HTTP {status}"
    assert report.passed is passes
    if not passes:
        assert check.fix
    if status == 404:
        assert "No POST route" in check.fix
    if (route, status) == ("webhook", 403):  # spec 6 says 401; a 403 is a guard in front
        assert "CSRF" in check.fix


def test_unreachable_and_unresolvable_origins(ca: trustme.CA, dns: DnsServer,
                                              listener: Listener) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    url = f"https://127.0.0.1:{port}"
    report = verify_runtime(url, expected(url), client(ca))
    assert failures(report)["manifest_fetch"].startswith("could not connect")
    url = f"https://nowhere.example.com:{listener.port}"
    report = verify_runtime(url, expected(url), client(ca, dns))
    assert failures(report) == {"manifest_fetch": "nowhere.example.com has no A or AAAA record"}


def test_loopback_is_refused_without_the_local_switch(
    origin: DeveloperOrigin, ca: trustme.CA, dns: DnsServer,
) -> None:
    origin.manifest = good_manifest(APP_ID, "space")
    strict = client(ca, dns, policy=STRICT)
    for url in (origin.url, f"https://localhost:{origin.port}"):
        report = verify_runtime(url, expected(url), strict)
        assert [(c.id, c.passed) for c in report.checks] == [("origin", False)]
    # A public-looking name that resolves to loopback: refused at resolution.
    url = f"https://origin.example.com:{origin.port}"
    report = verify_runtime(url, expected(url), strict)
    assert failures(report)["manifest_fetch"].endswith("which is not a public address")
    url = f"https://private.example.com:{origin.port}"
    assert not verify_runtime(url, expected(url), strict).passed
    assert origin.requests == []  # nothing was contacted
    # The same origin passes with the switch on.
    assert verify_runtime(origin.url, expected(origin.url), client(ca)).passed


@pytest.mark.parametrize("bad", ["https://api.localhost", "https://space.apps.localhost",
                                 "https://apps.localhost", "ftp://example.com",
                                 "https://example.com/path", "https://user@example.com",
                                 "http://example.com"])
def test_origins_the_policy_refuses(bad: str, ca: trustme.CA) -> None:
    report = verify_runtime(bad, expected(bad), client(ca))
    assert [(c.id, c.passed) for c in report.checks] == [("origin", False)]
    assert report.checks[0].fix.startswith("Save your own deployed HTTPS origin")


def test_plain_http_loopback_origin_for_local_development(ca: trustme.CA) -> None:
    from tests.manifest.origin import developer_origin
    with developer_origin(None) as local:
        local.manifest = good_manifest(APP_ID, "space")
        assert local.url.startswith("http://127.0.0.1:")
        report = verify_runtime(local.url, expected(local.url), client(ca))
    assert report.passed, failures(report)
