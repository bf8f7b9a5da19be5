"""The protocol-level fast path (router/fast_path.py) answers exactly as the ASGI path does.

Every test counts the requests the fast path took (``FastPath.taken``), so a rule shown
here is shown for the fast path, not for a fallback. The comparisons send the same raw
bytes through one router twice, with the fast path and then with it switched off
(``Service.fast_path`` is read by each new connection), and compare what the client and
the origin saw, byte for byte.
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from payments.models import RuntimeStatus
from router.fast_path import FastPath
from router.fast_protocol import MAX_BODY
from router.upstream_client import SLOW, TICK
from tests.factories import update_app
from tests.router.origins import RawOrigin, closed_port, proxied
from tests.router.test_proxy_disconnect import PROMPT, SilentOrigin, leave_before_the_answer
from tests.router.test_proxy_headers import CLAIM_NAMES, FORGED, OTHERS
from tests.support.router import RouterFactory, RunningRouter

ORIGIN_DATE = b"Mon, 01 Jan 2024 00:00:00 GMT"


async def fixed_origin(origin: RawOrigin, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> None:
    """Keep-alive answers echoing the request head it received, with a cookie, hop-by-hop
    headers (one named by Connection) and its own Server/Date; 204 for ``/empty``."""
    while True:
        head = await origin.read_head(reader)
        method, target = head.split(b" ", 2)[:2]
        status = b"204 No Content" if target == b"/empty" else b"200 OK"
        body = b"" if status.startswith(b"204") else b"you sent:\r\n" + head
        writer.write(b"HTTP/1.1 " + status + b"\r\n"
                     b"Server: origin/1.0\r\nDate: " + ORIGIN_DATE + b"\r\n"
                     b"Set-Cookie: sid=origin-secret\r\nSet-Cookie2: old=1\r\n"
                     b"Connection: keep-alive, X-Hop\r\nX-Hop: drop me\r\n"
                     b"Keep-Alive: timeout=5\r\nX-Origin: yes\r\nContent-Type: text/plain\r\n"
                     + (b"" if status.startswith(b"204") else
                        b"Content-Length: %d\r\n" % len(body))
                     + b"\r\n" + (b"" if method == b"HEAD" else body))
        await writer.drain()


@pytest.fixture
def origin() -> Iterator[RawOrigin]:
    with RawOrigin(fixed_origin) as server:
        yield server


def fast_path(router: RunningRouter) -> FastPath:
    fast = router.service.fast_path
    assert fast is not None, "the fast path is on by default"
    return fast


def request(router: RunningRouter, target: str = "/", method: str = "GET",
            extra: str = "", version: str = "1.1") -> bytes:
    return (f"{method} {target} HTTP/{version}\r\nHost: {router.host('game')}\r\n"
            f"{extra}\r\n").encode()


def exchange(router: RunningRouter, data: bytes, source: str | None = None) -> bytes:
    """Send ``data`` on one connection; everything the router sent until it closed."""
    with socket.create_connection(("127.0.0.1", router.port), timeout=10,
                                  source_address=(source, 0) if source else None) as conn:
        conn.sendall(data)
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
    return received


def one_at_a_time(router: RunningRouter, requests: list[tuple[bytes, bool]]) -> bytes:
    """Each request after the previous answer, on one connection (``bool``: HEAD)."""
    out = b""
    with socket.create_connection(("127.0.0.1", router.port), timeout=10) as conn:
        stream = conn.makefile("rb")
        for data, head_only in requests:
            conn.sendall(data)
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                line = stream.readline()
                assert line, "the router closed the connection early"
                head += line
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            out += head + (b"" if head_only else stream.read(length))
        out += stream.read()  # the last request asked to close: nothing more may come
    return out


# Every forwarding claim the router knows, as a client might forge it.
CLAIMS = "".join(f"{name}: {value}\r\n" for name, value in FORGED)
SCRIPT_EXTRA = ("Cookie: sid=client-secret\r\nConnection: keep-alive, X-Drop\r\n"
                "X-Drop: 1\r\nTE: trailers\r\nKeep-Alive: 300\r\nX-Visible: 1\r\n" + CLAIMS)


def script(router: RunningRouter) -> list[tuple[bytes, bool]]:
    return [
        (request(router, "/a?x=1&y=%20", extra=SCRIPT_EXTRA), False),
        (request(router, "/a", method="HEAD"), True),
        (request(router, "/empty"), False),
        (request(router, "/p", method="POST", extra="Content-Length: 0\r\n"), False),
        (request(router, "/last", extra="Connection: close\r\n"), False),
    ]


def both_ways(router: RunningRouter, origin: RawOrigin,
              run: Callable[[], bytes]) -> tuple[tuple[bytes, list[bytes], int], ...]:
    """(client bytes, origin heads, requests the fast path took) with it, then without."""
    seen = []
    fast = fast_path(router)
    for path in (fast, None):
        router.service.fast_path = path
        before, heads_before = fast.taken, len(origin.heads)
        received = run()
        seen.append((received, origin.heads[heads_before:], fast.taken - before))
    router.service.fast_path = fast
    return tuple(seen)


@contextmanager
def game(start: RouterFactory, sessions: sessionmaker[Session], url: str,
         **overrides: Any) -> Iterator[RunningRouter]:
    with proxied(start, sessions, url, **overrides) as router:
        # The route is cached by the first (ASGI) request; later ones can be fast.
        assert exchange(router, request(router, "/warm", extra="Connection: close\r\n"))
        yield router


def repoint(router: RunningRouter, sessions: sessionmaker[Session], url: str) -> None:
    """Give the app another origin and have the router cache it, without a request to it."""
    update_app(sessions, "game", runtime_origin=url)
    time.sleep(1.1)  # the cached route expires (no bus in these tests: TTL 1 s)
    # Looked up and cached by the ASGI path; the auth return page never reaches the origin.
    exchange(router, request(router, "/svc-auth-return", extra="Connection: close\r\n"))


def test_keep_alive_answers_are_the_asgi_paths_byte_for_byte(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with game(start_proxy_router, proxy_sessions, origin.url) as router:
        fast, slow = both_ways(router, origin, lambda: one_at_a_time(router, script(router)))
    assert fast[2] == 5 and slow[2] == 0
    assert fast[0] == slow[0]
    assert fast[1] == slow[1]
    answers, heads = fast[0], b"".join(fast[1])
    assert answers.count(b"HTTP/1.1 200 OK\r\n") == 4 and b"HTTP/1.1 204" in answers
    lowered = answers.lower()
    for gone in (b"set-cookie", b"x-hop", b"keep-alive:", b"origin-secret"):
        assert gone not in lowered
    assert lowered.count(b"server: origin/1.0") == 5 and lowered.count(b"date: ") == 5
    assert answers.endswith(b"connection: close\r\n\r\n" + b"you sent:\r\n" + fast[1][-1])
    for gone in (b"cookie", b"x-drop", b"te:", b"keep-alive", b"6.6.6.6", b"evil.example",
                 b"/evil", b"https", b": on\r\n"):
        assert gone not in heads.lower()
    for name in CLAIM_NAMES - {"x-forwarded-for", "x-forwarded-proto", "x-forwarded-host"}:
        assert f"\r\n{name}:".encode() not in heads.lower(), name
    first = fast[1][0].decode()
    assert first.startswith("GET /a?x=1&y=%20 HTTP/1.1\r\n")
    assert "x-visible: 1\r\n" in first.lower()
    assert f"host: 127.0.0.1:{origin.port}\r\n" in first.lower()
    assert "x-forwarded-for: 127.0.0.1\r\n" in first.lower()
    assert f"x-forwarded-host: {router.host('game')}\r\n" in first.lower()
    assert fast[1][1].startswith(b"HEAD /a ") and fast[1][3].startswith(b"POST /p ")


def test_pipelined_and_http_1_0_requests_match_the_asgi_path(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with game(start_proxy_router, proxy_sessions, origin.url) as router:
        pipelined = b"".join(data for data, _ in script(router))
        fast, slow = both_ways(router, origin, lambda: exchange(router, pipelined))
        old_fast, old_slow = both_ways(
            router, origin, lambda: exchange(router, request(router, "/old", version="1.0")))
    assert fast[2] == 5 and slow[2] == 0
    assert fast[0] == slow[0] and fast[1] == slow[1]
    assert [h.split(b" ", 2)[1] for h in fast[1]] == [b"/a?x=1&y=%20", b"/a", b"/empty",
                                                      b"/p", b"/last"]
    assert fast[0].count(b"HTTP/1.1 ") == 5  # in order, none lost
    assert old_fast[2] == 1 and old_slow[2] == 0
    assert old_fast[0] == old_slow[0]
    assert old_fast[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"\r\nconnection: close\r\n" in old_fast[0]  # and the router closed: we read EOF


# What only the edge may say of the app's host name (alternative services, instructions to
# nginx) and a Clear-Site-Data reaching past the app's origin ("cookies"), in an answer
# the fast path writes whole and in one it hands to the ASGI path's streaming relay.
EDGE_ONLY = (b'Alt-Svc: h3=":8443"; ma=2592000; persist=1\r\nalt-svc: clear\r\n'
             b"X-Accel-Redirect: /svc-auth-return?app=game&code=forged-code\r\n"
             b"X-Accel-Buffering: yes\r\nX-Accel-Limit-Rate: 1\r\n"
             b'Clear-Site-Data: "cookies", "cache"\r\n')
STREAMED = 200 * 1024  # above router.proxy.SMALL_BODY: relayed as it arrives


async def edge_claiming(origin: RawOrigin, reader: asyncio.StreamReader,
                        writer: asyncio.StreamWriter) -> None:
    while True:
        head = await origin.read_head(reader)
        body = b"s" * STREAMED if head.startswith(b"GET /streamed ") else b"whole"
        writer.write(b"HTTP/1.1 200 OK\r\nServer: origin/1.0\r\nDate: " + ORIGIN_DATE
                     + b"\r\n" + EDGE_ONLY + b"X-Origin: yes\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()


def test_headers_only_the_edge_may_send_are_dropped_as_on_the_asgi_path(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session]) -> None:
    with RawOrigin(edge_claiming) as origin, \
            game(start_proxy_router, proxy_sessions, origin.url) as router:
        sent = [(request(router, "/"), False), (request(router, "/streamed"), False),
                (request(router, "/last", extra="Connection: close\r\n"), False)]
        fast, slow = both_ways(router, origin, lambda: one_at_a_time(router, sent))
    assert fast[2] == 3 and slow[2] == 0
    assert fast[0] == slow[0]
    answers = fast[0].lower()
    assert answers.count(b"x-origin: yes\r\n") == 3
    assert answers.count(b'\r\nclear-site-data: "cache"\r\n') == 3
    for gone in (b"alt-svc", b"x-accel-", b'"cookies"', b"forged-code"):
        assert gone not in answers, gone
    assert answers.count(b"s" * STREAMED) == 1


def test_a_trusted_proxy_vouches_for_the_chain_only_on_the_fast_path(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    trusted = (ipaddress.ip_network("127.0.0.2/32"),)
    claims = CLAIMS + "Connection: close\r\n"
    with game(start_proxy_router, proxy_sessions, origin.url,
              trusted_proxies=trusted) as router:
        fast_proxy, slow_proxy = both_ways(router, origin, lambda: exchange(
            router, request(router, extra=claims), source="127.0.0.2"))
        fast_client, slow_client = both_ways(router, origin, lambda: exchange(
            router, request(router, extra=claims), source="127.0.0.1"))
    assert (fast_proxy[2], slow_proxy[2], fast_client[2], slow_client[2]) == (1, 0, 1, 0)
    # Both paths send the origin the same head, from the proxy and from the client.
    assert fast_proxy[1] == slow_proxy[1] and fast_client[1] == slow_client[1]
    from_proxy, from_client = fast_proxy[1][0].lower(), fast_client[1][0].lower()
    assert b"x-forwarded-for: 6.6.6.6, 7.7.7.7, 127.0.0.2\r\n" in from_proxy
    assert b"x-forwarded-proto: https\r\n" in from_proxy
    for name, _ in OTHERS:  # from the trusted proxy as from the client: dropped
        assert f"\r\n{name}:".encode() not in from_proxy, name
    assert b"x-forwarded-for: 127.0.0.1\r\n" in from_client
    assert b"x-forwarded-proto: http\r\n" in from_client and b"6.6.6.6" not in from_client
    for name in CLAIM_NAMES - {"x-forwarded-for", "x-forwarded-proto", "x-forwarded-host"}:
        assert f"\r\n{name}:".encode() not in from_client, name


def test_the_fast_path_is_taken_only_for_what_it_covers(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with game(start_proxy_router, proxy_sessions, origin.url) as router:
        fast = fast_path(router)
        close = "Connection: close\r\n"
        not_fast = [
            request(router, "/upload", method="POST",
                    extra=f"Content-Length: {MAX_BODY + 1}\r\n" + close)
            + b"u" * (MAX_BODY + 1),
            request(router, "/upload", method="POST",
                    extra="Transfer-Encoding: chunked\r\n" + close) + b"3\r\nabc\r\n0\r\n\r\n",
            request(router, "/svc-auth-return", extra=close),
            request(router, "/svc%2Dauth-return/", extra=close),
            request(router, "/", extra="Expect: 100-continue\r\n" + close),
            f"GET / HTTP/1.1\r\nHost: api.localhost:{router.port}\r\n{close}\r\n".encode(),
            f"GET / HTTP/1.1\r\nHost: ghost.{router.settings.apps_domain}\r\n{close}\r\n"
            .encode(),
        ]
        for data in not_fast:
            before = fast.taken
            assert exchange(router, data).startswith(b"HTTP/1.1 ")
            assert fast.taken == before, data
        fast_ones = [
            request(router, "/x", method="DELETE", extra=close),
            request(router, "/upload", method="POST",
                    extra=f"Content-Length: {MAX_BODY}\r\n" + close) + b"u" * MAX_BODY,
        ]
        for data in fast_ones:
            before = fast.taken
            assert exchange(router, data).startswith(b"HTTP/1.1 200 ")
            assert fast.taken == before + 1, data


@pytest.mark.parametrize("change", [{"kill_switch": True},
                                    {"runtime_status": RuntimeStatus.DISABLED}])
def test_a_change_to_the_app_stops_the_fast_path_within_the_cache_window(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin, change: dict[str, object]) -> None:
    with game(start_proxy_router, proxy_sessions, origin.url) as router:
        fast = fast_path(router)
        before = fast.taken
        assert exchange(router, request(router, extra="Connection: close\r\n")).startswith(
            b"HTTP/1.1 200 ")
        assert fast.taken == before + 1
        update_app(proxy_sessions, "game", **change)  # no bus here: the TTL (1 s) ends it
        changed = time.monotonic()
        while True:
            answer = exchange(router, request(router, extra="Connection: close\r\n"))
            if answer.startswith(b"HTTP/1.1 503 "):
                break
            assert time.monotonic() - changed < 1.5, "still proxied after the cache window"
            time.sleep(0.02)
        taken = fast.taken
        assert b"is not available right now" in answer
        assert exchange(router, request(router, extra="Connection: close\r\n")).startswith(
            b"HTTP/1.1 503 ")
        assert fast.taken == taken  # a closed gate is never served fast


async def never_answers(origin: RawOrigin, reader: asyncio.StreamReader,
                        writer: asyncio.StreamWriter) -> None:
    await origin.read_head(reader)
    await asyncio.Event().wait()


@pytest.mark.parametrize("kind", ["down", "timeout"])
def test_origin_failures_get_the_asgi_paths_gateway_pages(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin, kind: str) -> None:
    with RawOrigin(never_answers) as silent:
        url = f"http://127.0.0.1:{closed_port()}" if kind == "down" else silent.url
        # Warmed against the working origin, then pointed at the failing one: the route
        # stays cached, so the failing requests can take the fast path.
        with game(start_proxy_router, proxy_sessions, origin.url,
                  proxy_read_timeout=0.5) as router:
            repoint(router, proxy_sessions, url)
            fast, slow = both_ways(router, origin, lambda: exchange(
                router, request(router, extra="Connection: close\r\n")))
    assert fast[2] == 1 and slow[2] == 0
    assert fast[0] == slow[0]
    status = b"502" if kind == "down" else b"504"
    assert fast[0].startswith(b"HTTP/1.1 " + status + b" ")
    assert (b"could not be reached" if kind == "down" else b"did not answer in time") \
        in fast[0]


def leaving_closes_the_upstream(start_proxy_router: RouterFactory,
                                proxy_sessions: sessionmaker[Session], origin_url: str,
                                sent: Callable[[RunningRouter], bytes]) -> RawOrigin:
    """The client sends ``sent`` (through the fast path) to an origin that never answers,
    then leaves: the origin's connection is closed promptly. Returns that origin."""
    silent = SilentOrigin()
    with RawOrigin(silent.handle) as raw, \
            game(start_proxy_router, proxy_sessions, origin_url,
                 proxy_read_timeout=60.0) as router:
        repoint(router, proxy_sessions, raw.url)
        fast = fast_path(router)
        before = fast.taken
        left_at = leave_before_the_answer(router, silent, sent(router))
        assert fast.taken == before + 1
        assert silent.closed.wait(PROMPT + 3), "the origin's connection stayed open"
        assert silent.closed_at[0] - left_at < PROMPT
    return raw


def test_a_client_leaving_closes_the_upstream_on_the_fast_path(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    leaving_closes_the_upstream(start_proxy_router, proxy_sessions, origin.url,
                                lambda router: request(router, "/wait"))


@dataclass
class Held:
    """A router whose app's origin answers each connection's first request and holds the
    next until the router closes it."""
    router: RunningRouter
    fast: FastPath
    arrived: threading.Event  # the held request reached the origin
    closed_at: list[float]  # when the origin saw its connection closed

    def hold_a_request(self, client: socket.socket) -> None:
        """On ``client``: a first request (its origin connection is pooled after it), then
        one the origin holds, sent on that connection by the fast path."""
        client.sendall(request(self.router, "/first"))
        assert client.recv(4096).endswith(b"first")  # its connection is now pooled
        before = self.fast.untasked
        client.sendall(request(self.router, "/wait"))
        assert self.arrived.wait(5), "the request never reached the origin"
        assert self.fast.untasked == before + 1, "the request left the fast path"

    def closed(self) -> float:
        """When the origin saw the router close its connection (within 5 s)."""
        deadline = time.monotonic() + 5
        while not self.closed_at and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self.closed_at, "the origin's connection stayed open"
        return self.closed_at[0]


@contextmanager
def held(start: RouterFactory, sessions: sessionmaker[Session], url: str) -> Iterator[Held]:
    arrived = threading.Event()
    closed_at: list[float] = []
    with RawOrigin(first_answer_only("hold", arrived, closed_at)) as raw, \
            game(start, sessions, url, proxy_read_timeout=60.0) as router:
        repoint(router, sessions, raw.url)
        yield Held(router, fast_path(router), arrived, closed_at)


def test_a_slow_answer_on_the_fast_path_needs_no_watching_task_and_leaving_cuts_at_once(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    """The protocol itself tells the exchange its client left: no task watches each slow
    request (under load, most requests are slow), and the origin's connection is closed
    at once, not at the upstream client's next sweep past SLOW."""
    with held(start_proxy_router, proxy_sessions, origin.url) as holding:
        port = holding.router.port
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            holding.hold_a_request(client)
            time.sleep(SLOW + 3 * TICK)  # past the point where a sweep would watch it
            busy = list(holding.fast.proxy.client()._busy)  # across threads: a snapshot
            assert busy and all(conn.watcher is None for conn in busy)
            left_at = time.monotonic()
        assert holding.closed() - left_at < SLOW


def test_a_client_leaving_a_slow_answer_leaves_nothing_to_the_collector(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    """A client that leaves while the origin is slow to answer: its protocol, its head
    parser, its exchange and the cut origin connection go when their last reference does,
    not at the collector's next pass over reference cycles. When a crowd of clients leaves
    at once, that pass (over every one of them) stalls every request of the process."""
    ours = {"FastProtocol", "RequestHead", "HttpRequestParser", "FastExchange", "OriginConnection",
            "HttpResponseParser", "RequestResponseCycle"}
    with held(start_proxy_router, proxy_sessions, origin.url) as holding:
        flags = gc.get_debug()
        gc.collect()
        gc.set_debug(flags | gc.DEBUG_SAVEALL)  # what a pass finds is kept, to be named
        try:
            port = holding.router.port
            with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
                holding.hold_a_request(client)
            holding.closed()
            time.sleep(0.2)  # both transports report connection_lost
            gc.collect()
            found = sorted({type(thing).__name__ for thing in gc.garbage} & ours)
        finally:
            gc.set_debug(flags)
            gc.garbage.clear()
    assert found == []


def first_answer_only(then: str, second: threading.Event | None = None,
                      closed_at: list[float] | None = None,
                      ) -> Callable[[RawOrigin, asyncio.StreamReader, asyncio.StreamWriter],
                                    Awaitable[None]]:
    """Answers the first request of each connection (keep-alive); at the next one it hangs
    up without a word (``then="hang up"``) or never answers (``then="stall"``, or
    ``then="hold"``: until the router closes the connection, noting when in
    ``closed_at``). ``second`` is set once the next request has arrived."""
    async def handle(origin: RawOrigin, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        await origin.read_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
        await writer.drain()
        await origin.read_head(reader)
        if second is not None:
            second.set()
        if then == "stall":
            await asyncio.Event().wait()
        elif then == "hold":
            await reader.read()
            if closed_at is not None:
                closed_at.append(time.monotonic())
    return handle


@pytest.mark.parametrize("then", ["hang up", "stall"])
def test_a_pooled_connection_that_fails_is_handled_as_on_the_asgi_path(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        then: str) -> None:
    """The fast path sends at once on an idle pooled connection; when that connection turns
    out closed (retried on a new one, as the client retries) or silent (504), the answer
    is the ASGI path's."""
    with RawOrigin(first_answer_only(then)) as raw, \
            game(start_proxy_router, proxy_sessions, raw.url, proxy_read_timeout=0.5) as router:
        fast = fast_path(router)
        runs = []
        for path in (fast, None):
            router.service.fast_path = path
            # Each request's connection is left pooled by the one before (the warm-up first).
            pair = request(router, "/one") + request(router, "/two", extra="Connection: close\r\n")
            before, started = fast.taken, fast.untasked
            runs.append((exchange(router, pair), fast.taken - before, fast.untasked - started))
        router.service.fast_path = fast
    (fast_bytes, fast_taken, fast_untasked), (slow_bytes, slow_taken, _) = runs
    assert fast_taken == 2 and fast_untasked >= 1 and slow_taken == 0
    assert fast_bytes == slow_bytes
    if then == "hang up":
        assert fast_bytes.count(b"HTTP/1.1 200 OK\r\n") == 2
        assert fast_bytes.endswith(b"first")
    else:  # /one on the connection the warm-up left (504), /two on a new one
        assert fast_bytes.startswith(b"HTTP/1.1 504 ") and b"did not answer in time" in fast_bytes
        assert fast_bytes.endswith(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n"
                                   b"connection: close\r\n\r\nfirst")
