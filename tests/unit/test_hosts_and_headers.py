"""Pure decisions: host classification and proxy header policy."""

from __future__ import annotations

import ipaddress

import pytest

from router.headers import (
    connection_named,
    content_length,
    downstream_response_headers,
    upstream_request_headers,
)
from router.hosts import HostKind, HostTable, strip_port
from router.settings import Settings

TABLE = HostTable(Settings())


@pytest.mark.parametrize(("host", "kind", "slug"), [
    ("api.localhost:8000", HostKind.API, None),
    ("API.LOCALHOST", HostKind.API, None),
    ("portal.localhost:9999", HostKind.PORTAL, None),
    ("console.localhost", HostKind.CONSOLE, None),
    ("docs.localhost:8000", HostKind.DOCS, None),
    ("launch.localhost:8000", HostKind.LEGACY_LAUNCH, None),
    ("demo.apps.localhost:8000", HostKind.RUNTIME, "demo"),
    ("Demo.Apps.Localhost.", HostKind.RUNTIME, "demo"),
    ("space-blaster.apps.localhost", HostKind.RUNTIME, "space-blaster"),
    ("a.b.apps.localhost", HostKind.UNKNOWN, None),
    ("apps.localhost", HostKind.UNKNOWN, None),
    (".apps.localhost", HostKind.UNKNOWN, None),
    ("-bad.apps.localhost", HostKind.UNKNOWN, None),
    ("demo.apps.localhost.evil.com", HostKind.UNKNOWN, None),
    ("evilapps.localhost", HostKind.UNKNOWN, None),
    ("127.0.0.1:8000", HostKind.UNKNOWN, None),
    ("[::1]:8000", HostKind.UNKNOWN, None),
    ("", HostKind.UNKNOWN, None),
    (None, HostKind.UNKNOWN, None),
])
def test_classify(host: str | None, kind: HostKind, slug: str | None) -> None:
    target = TABLE.classify(host)
    assert (target.kind, target.slug) == (kind, slug)


def test_strip_port_keeps_ipv6_literal() -> None:
    assert strip_port("[::1]:8000") == "[::1]"
    assert strip_port("example.com:443") == "example.com"


def test_connection_named_headers() -> None:
    headers = [(b"connection", b"close, X-Hop ,keep-alive"), (b"connection", b"x-other")]
    assert connection_named(headers) == {b"close", b"x-hop", b"keep-alive", b"x-other"}


REQUEST = [
    (b"host", b"demo.apps.localhost:8000"), (b"cookie", b"sid=1"), (b"connection", b"x-hop"),
    (b"x-hop", b"1"), (b"te", b"trailers"), (b"keep-alive", b"timeout=5"),
    (b"proxy-authorization", b"Basic x"), (b"upgrade", b"h2c"),
    (b"x-forwarded-for", b"6.6.6.6"), (b"x-forwarded-proto", b"https"),
    (b"x-forwarded-host", b"evil.example"), (b"forwarded", b"for=6.6.6.6"),
    (b"x-real-ip", b"6.6.6.6"), (b"accept", b"*/*"), (b"content-length", b"3"),
]


def test_untrusted_client_forwarding_replaced() -> None:
    out = upstream_request_headers(REQUEST, upstream_host=b"origin:9000", client_ip="1.2.3.4",
                                   scheme="http", trusted_proxy=False)
    assert out == [
        (b"accept", b"*/*"), (b"content-length", b"3"), (b"host", b"origin:9000"),
        (b"x-forwarded-for", b"1.2.3.4"), (b"x-forwarded-proto", b"http"),
        (b"x-forwarded-host", b"demo.apps.localhost:8000"),
    ]


# Forwarding claims beyond the three we write, each read by some popular framework
# (docs/router.md has who reads which).
OTHER_CLAIMS = [b"forwarded", b"x-real-ip", b"x-forwarded-port", b"x-forwarded-prefix",
                b"x-forwarded-path", b"x-forwarded-ssl", b"x-forwarded-scheme",
                b"x-forwarded-protocol", b"front-end-https", b"x-url-scheme",
                b"x-forwarded-server", b"x-forwarded", b"forwarded-for",
                b"x-original-forwarded-for", b"client-ip", b"x-client-ip", b"true-client-ip",
                b"cf-connecting-ip", b"fastly-client-ip", b"x-cluster-client-ip",
                b"x-original-url", b"x-rewrite-url", b"x-original-uri", b"x-forwarded-uri"]


@pytest.mark.parametrize("name", OTHER_CLAIMS)
def test_every_forwarding_claim_is_dropped_from_clients_and_from_proxies(
        name: bytes) -> None:
    # A stock nginx in front passes the client's own X-Real-IP, X-Original-URL... on: a
    # trusted proxy vouches for X-Forwarded-For/Proto/Host only (deploy walk 25).
    sent = [(b"host", b"demo.apps.localhost"), (name, b"6.6.6.6"), (b"accept", b"*/*")]
    for trusted in (False, True):
        out = upstream_request_headers(sent, upstream_host=b"origin", client_ip="10.0.0.1",
                                       scheme="http", trusted_proxy=trusted)
        assert name not in [n for n, _ in out], (name, trusted)
        assert (b"accept", b"*/*") in out


def test_the_dropped_claims_are_the_documented_list() -> None:
    from router.headers import FOREIGN_FORWARDING

    assert frozenset(OTHER_CLAIMS) == FOREIGN_FORWARDING


def test_trusted_proxy_chain_appended() -> None:
    out = dict(upstream_request_headers(REQUEST, upstream_host=b"origin", client_ip="10.0.0.1",
                                        scheme="http", trusted_proxy=True))
    assert out[b"x-forwarded-for"] == b"6.6.6.6, 10.0.0.1"
    assert out[b"x-forwarded-proto"] == b"https"
    assert out[b"x-forwarded-host"] == b"evil.example"
    assert b"forwarded" not in out and b"x-real-ip" not in out
    assert b"cookie" not in out and b"x-hop" not in out


def test_response_headers() -> None:
    out = downstream_response_headers([
        (b"Set-Cookie", b"a=1"), (b"set-cookie", b"b=2"), (b"Connection", b"X-Trace"),
        (b"X-Trace", b"t"), (b"Transfer-Encoding", b"chunked"), (b"Content-Encoding", b"gzip"),
        (b"Server", b"origin"), (b"Date", b"Sun, 22 Nov 2026 00:00:00 GMT"),
    ])
    assert out == [(b"content-encoding", b"gzip"), (b"server", b"origin"),
                   (b"date", b"Sun, 22 Nov 2026 00:00:00 GMT")]


@pytest.mark.parametrize(("headers", "kept", "length"), [
    ([(b"Content-Length", b"5"), (b"Connection", b"keep-alive"), (b"X-A", b"1")],
     [(b"content-length", b"5"), (b"x-a", b"1")], 5),
    # The first Content-Length says the length, even when it is no number.
    ([(b"Content-Length", b"x"), (b"Content-Length", b"5")],
     [(b"content-length", b"x"), (b"content-length", b"5")], None),
    ([(b"Content-Length", b"5"), (b"Content-Length", b"7")],
     [(b"content-length", b"5"), (b"content-length", b"7")], 5),
    # A Content-Length the Connection header names is not sent on, nor believed.
    ([(b"Connection", b"Content-Length, X-B"), (b"Content-Length", b"5"), (b"X-B", b"2"),
      (b"X-C", b"3")], [(b"x-c", b"3")], None),
    ([(b"connection", b"close"), (b"Connection", b"keep-alive, X-D"), (b"x-d", b"4")], [],
     None),
    # Alternative services for our host name are the edge's to advertise, in any case.
    ([(b"Alt-Svc", b'h3=":8443"; ma=86400'), (b"ALT-SVC", b"clear"), (b"X-E", b"5")],
     [(b"x-e", b"5")], None),
    ([], [], None),
])
def test_response_plan(headers: list[tuple[bytes, bytes]], kept: list[tuple[bytes, bytes]],
                       length: int | None) -> None:
    from router.headers import plan_response
    assert plan_response(headers) == (kept, length)


@pytest.mark.parametrize(("raw", "value"), [(b"12", 12), (b"-1", None), (b"x", None)])
def test_content_length(raw: bytes, value: int | None) -> None:
    assert content_length([(b"Content-Length", raw)]) == value


def test_is_trusted() -> None:
    from router.headers import is_trusted
    nets = (ipaddress.ip_network("10.0.0.0/8"),)
    assert is_trusted("10.1.2.3", nets)
    assert not is_trusted("11.1.2.3", nets)
    assert not is_trusted("not-an-ip", nets)
    assert not is_trusted("10.1.2.3", ())


PROXIES = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32", "::1/128", "fe80::/10"))
MAPPED = (ipaddress.ip_network("::ffff:10.0.0.0/104"),)


@pytest.mark.parametrize(("peer", "nets", "trusted"), [
    ("10.1.2.3", PROXIES, True), ("11.1.2.3", PROXIES, False),
    ("192.0.2.7", PROXIES, True), ("192.0.2.8", PROXIES, False),
    ("2001:db8::5", PROXIES, True), ("2001:0db8:0:0::5", PROXIES, True),
    ("2001:db9::5", PROXIES, False), ("::1", PROXIES, True), ("0:0::1", PROXIES, True),
    ("::2", PROXIES, False), ("fe80::1%eth0", PROXIES, True),
    # An IPv4 peer of a socket listening on IPv6 is seen mapped: the same peer, held by a
    # network written either way.
    ("::ffff:10.1.2.3", PROXIES, True), ("::ffff:10.1.2.3", MAPPED, True),
    ("10.1.2.3", MAPPED, True), ("::ffff:11.1.2.3", PROXIES, False),
    ("11.1.2.3", MAPPED, False), ("::ffff:192.0.2.7", PROXIES, True),
    ("not-an-ip", PROXIES, False), ("", PROXIES, False), (None, PROXIES, False),
    ("10.1.2.3", (), False), ("::1", (), False),
])
def test_trusted_proxies_answer_as_is_trusted(
        peer: str | None, nets: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...],
        trusted: bool) -> None:
    from router.headers import TrustedProxies, is_trusted
    proxies = TrustedProxies(nets)
    assert is_trusted(peer, nets) is trusted
    assert proxies.trusts(peer) is trusted
    assert proxies.trusts(peer) is trusted  # remembered, the same answer


def test_trusted_proxies_remember_a_bounded_number_of_peers() -> None:
    from router.headers import MAX_PEERS, TrustedProxies
    proxies = TrustedProxies(PROXIES)
    for i in range(3 * MAX_PEERS + 7):
        assert not proxies.trusts(f"2001:db9::{i:x}")
        assert proxies.trusts(f"10.0.{i // 256 % 256}.{i % 256}")
        assert len(proxies) <= MAX_PEERS
    assert len(proxies) > 0
    assert proxies.trusts("::1") and not proxies.trusts("11.0.0.1")
    # Without trusted proxies there is nothing to remember.
    nobody = TrustedProxies(())
    for i in range(100):
        assert not nobody.trusts(f"10.0.0.{i}")
    assert len(nobody) == 0
