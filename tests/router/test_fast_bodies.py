"""Request bodies on the fast path (router/fast_protocol.py): a Content-Length body up to
``MAX_BODY`` is held whole and proxied by the fast protocol, and what the client and the
origin see is, byte for byte, what the ASGI path (the fast path off) gives them.

As in tests/router/test_proxy_fast_path.py, the same raw bytes go through one router
twice, with the fast path and without it, and every test counts the requests the fast
path took (``FastPath.taken``), so a rule shown here is shown for the fast path.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session, sessionmaker

from router.fast_protocol import MAX_BODY
from tests.factories import add_app
from tests.router.origins import RawOrigin, closed_port
from tests.router.test_fast_protocol import Answers, served
from tests.router.test_proxy_fast_path import (
    ORIGIN_DATE,
    SCRIPT_EXTRA,
    exchange,
    fast_path,
    first_answer_only,
    game,
    leaving_closes_the_upstream,
    never_answers,
    one_at_a_time,
    repoint,
    request,
)
from tests.support.router import RouterFactory, RunningRouter


class BodyOrigin(RawOrigin):
    """Keep-alive answers echoing the request head and body it received (with a cookie,
    hop-by-hop headers and its own Server/Date, as the fast path tests' origin); every
    whole request it read, head and body, is in ``requests``."""

    def __init__(self) -> None:
        super().__init__(self._serve)
        self.requests: list[bytes] = []

    async def _serve(self, origin: RawOrigin, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        while True:
            head = await origin.read_head(reader)
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.lower() == b"content-length":
                    length = int(value)
            body = await reader.readexactly(length)
            self.requests.append(head + body)
            answer = b"you sent:\r\n" + head + body
            writer.write(b"HTTP/1.1 200 OK\r\nServer: origin/1.0\r\nDate: " + ORIGIN_DATE +
                         b"\r\nSet-Cookie: sid=origin-secret\r\nConnection: keep-alive, X-Hop"
                         b"\r\nX-Hop: drop me\r\nContent-Type: text/plain\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(answer), answer))
            await writer.drain()


@pytest.fixture
def origin() -> Iterator[BodyOrigin]:
    server = BodyOrigin()
    with server:
        yield server


def body_of(size: int) -> bytes:
    """``size`` bytes of JSON-ish text, different at every offset (a shifted or cut body
    would not compare equal)."""
    text = b"".join(b'{"n":%08d},' % i for i in range(size // 13 + 1))
    return text[:size]


def with_body(router: RunningRouter, method: str, target: str, body: bytes,
              extra: str = "") -> bytes:
    return request(router, target, method=method,
                   extra=f"Content-Length: {len(body)}\r\nContent-Type: application/json\r\n"
                   + extra) + body


def both_ways(router: RunningRouter, origin: BodyOrigin,
              send: bytes | list[tuple[bytes, bool]]) -> list[tuple[bytes, list[bytes], int]]:
    """(client bytes, whole requests the origin read, requests the fast path took), with
    the fast path and then without; ``send`` is pipelined bytes or requests one at a time."""
    seen = []
    fast = fast_path(router)
    for path in (fast, None):
        router.service.fast_path = path
        before, requests_before = fast.taken, len(origin.requests)
        received = (exchange(router, send) if isinstance(send, bytes)
                    else one_at_a_time(router, send))
        time.sleep(0.05)  # the origin's thread has noted the last request
        seen.append((received, origin.requests[requests_before:], fast.taken - before))
    router.service.fast_path = fast
    return seen


SIZES = (0, 1, 16 * 1024, MAX_BODY)


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH"])
def test_bodies_up_to_the_bound_go_fast_and_match_the_asgi_path_byte_for_byte(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: BodyOrigin, method: str) -> None:
    with game(start_proxy_router, proxy_sessions, origin.url) as router:
        script = [(with_body(router, method, f"/b{size}?s={size}", body_of(size),
                             SCRIPT_EXTRA), False) for size in SIZES]
        script.append((request(router, "/last", extra="Connection: close\r\n"), False))
        fast, slow = both_ways(router, origin, script)
    assert fast[2] == len(SIZES) + 1 and slow[2] == 0  # the connection stayed fast
    assert fast[0] == slow[0]
    assert fast[1] == slow[1]
    assert len(fast[1]) == len(SIZES) + 1
    for size, sent in zip(SIZES, fast[1], strict=False):
        head, body = sent.split(b"\r\n\r\n", 1)
        assert head.startswith(f"{method} /b{size}?s={size} HTTP/1.1\r\n".encode())
        assert body == body_of(size)
        lowered = head.lower() + b"\r\n"
        assert f"\r\ncontent-length: {size}\r\n".encode() in lowered
        assert b"\r\nx-forwarded-for: 127.0.0.1\r\n" in lowered
        assert f"\r\nx-forwarded-host: {router.host('game')}\r\n".encode() in lowered
        assert b"\r\nx-visible: 1\r\n" in lowered
        for gone in (b"cookie", b"x-drop", b"\r\nte:", b"keep-alive", b"6.6.6.6",
                     b"evil.example"):
            assert gone not in lowered
    answers = fast[0].lower()
    assert answers.count(b"http/1.1 200 ok\r\n") == len(SIZES) + 1
    assert b"set-cookie" not in answers and b"x-hop" not in answers


def test_a_body_over_the_bound_hands_the_connection_over_and_still_matches(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: BodyOrigin) -> None:
    with game(start_proxy_router, proxy_sessions, origin.url) as router:
        script = [(request(router, "/first"), False),
                  (with_body(router, "POST", "/big", body_of(MAX_BODY + 1)), False),
                  (request(router, "/after", extra="Connection: close\r\n"), False)]
        fast, slow = both_ways(router, origin, script)
    # Only /first was the fast protocol's: uvicorn owns the connection from /big on.
    assert fast[2] == 1 and slow[2] == 0
    assert fast[0] == slow[0] and fast[1] == slow[1]
    assert fast[1][1].endswith(b"\r\n\r\n" + body_of(MAX_BODY + 1))


def test_pipelined_requests_around_bodies_are_each_their_own_request(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: BodyOrigin) -> None:
    with game(start_proxy_router, proxy_sessions, origin.url) as router:
        # The first body is a request's bytes: it must reach the origin as a body only.
        inner = request(router, "/smuggled")
        pipelined = (with_body(router, "POST", "/one", inner) + request(router, "/two")
                     + with_body(router, "PUT", "/three", body_of(16 * 1024))
                     + request(router, "/four", extra="Connection: close\r\n"))
        fast, slow = both_ways(router, origin, pipelined)
    assert fast[2] == 4 and slow[2] == 0
    assert fast[0] == slow[0] and fast[1] == slow[1]
    assert [r.split(b" ", 2)[1] for r in fast[1]] == [b"/one", b"/two", b"/three", b"/four"]
    assert fast[1][0].endswith(b"\r\n\r\n" + inner)
    assert fast[0].count(b"HTTP/1.1 200 OK\r\n") == 4


def test_a_body_over_the_proxys_limit_gets_the_same_413_and_the_connection_goes_on(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: BodyOrigin) -> None:
    with game(start_proxy_router, proxy_sessions, origin.url,
              proxy_max_request_bytes=1000) as router:
        pipelined = (with_body(router, "POST", "/small", body_of(1000))
                     + with_body(router, "POST", "/large", body_of(1001))
                     + request(router, "/after", extra="Connection: close\r\n"))
        fast, slow = both_ways(router, origin, pipelined)
    assert fast[2] == 1 and slow[2] == 0  # /small; /large is uvicorn's, and so is /after
    assert fast[0] == slow[0] and fast[1] == slow[1]
    assert [r.split(b" ", 2)[1] for r in fast[1]] == [b"/small", b"/after"]
    assert b"HTTP/1.1 413 " in fast[0]
    assert b"larger than this app accepts" in fast[0]


@pytest.mark.parametrize("kind", ["down", "timeout"])
def test_origin_failures_with_a_body_get_the_asgi_paths_gateway_pages(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: BodyOrigin, kind: str) -> None:
    with RawOrigin(never_answers) as silent:
        url = f"http://127.0.0.1:{closed_port()}" if kind == "down" else silent.url
        with game(start_proxy_router, proxy_sessions, origin.url,
                  proxy_read_timeout=0.5) as router:
            repoint(router, proxy_sessions, url)
            data = with_body(router, "POST", "/pay", body_of(16 * 1024),
                             "Connection: close\r\n")
            fast, slow = both_ways(router, origin, data)
    assert fast[2] == 1 and slow[2] == 0
    assert fast[0] == slow[0]
    status = b"502" if kind == "down" else b"504"
    assert fast[0].startswith(b"HTTP/1.1 " + status + b" ")
    assert (b"could not be reached" if kind == "down" else b"did not answer in time") \
        in fast[0]


def test_a_body_is_never_replayed_when_its_pooled_connection_was_closed(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session]) -> None:
    """A PUT is idempotent, and bodyless it would be retried on a new connection; with a
    body it is not, on either path: the origin may have acted on it."""
    with RawOrigin(first_answer_only("hang up")) as raw, \
            game(start_proxy_router, proxy_sessions, raw.url) as router:
        fast = fast_path(router)
        runs = []
        for path in (fast, None):
            router.service.fast_path = path
            # The connection the previous request left pooled is closed at this one.
            pair = (with_body(router, "PUT", "/one", body_of(100))
                    + request(router, "/two", extra="Connection: close\r\n"))
            before, connections = fast.taken, raw.connections
            runs.append((exchange(router, pair), fast.taken - before,
                         raw.connections - connections))
        router.service.fast_path = fast
    (fast_bytes, fast_taken, fast_opened), (slow_bytes, slow_taken, slow_opened) = runs
    assert fast_taken == 2 and slow_taken == 0
    assert fast_bytes == slow_bytes
    assert fast_bytes.startswith(b"HTTP/1.1 502 ") and b"could not be reached" in fast_bytes
    assert fast_bytes.endswith(b"\r\n\r\nfirst")  # /two, on a new connection
    assert fast_opened == slow_opened == 1  # /two's alone: /one was not sent again


def test_a_client_leaving_mid_body_gets_nothing_and_sends_the_origin_nothing(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: BodyOrigin) -> None:
    with game(start_proxy_router, proxy_sessions, origin.url) as router:
        fast = fast_path(router)
        body = body_of(16 * 1024)
        partial = with_body(router, "POST", "/cut", body)[:-len(body) // 2]
        seen = []
        for path in (fast, None):
            router.service.fast_path = path
            before, heads = fast.taken, len(origin.heads)
            with socket.create_connection(("127.0.0.1", router.port), timeout=10) as conn:
                conn.sendall(partial)
                time.sleep(0.2)  # the router holds (or forwards) what it has
                conn.shutdown(socket.SHUT_WR)
                received = conn.recv(65536)
            time.sleep(0.2)  # anything the router sent on has reached the origin
            seen.append((received, origin.heads[heads:], fast.taken - before))
        router.service.fast_path = fast
        # The router serves on: the fast path is not stuck with the cut request.
        after = exchange(router, with_body(router, "POST", "/after", body,
                                           "Connection: close\r\n"))
    (fast_received, fast_heads, fast_taken), (slow_received, _, slow_taken) = seen
    assert fast_received == slow_received == b""  # no answer, the connection closed
    assert fast_taken == slow_taken == 0
    # The fast protocol sends nothing before the body is whole (the ASGI path streams the
    # head and what came of the body, and the origin sees the request cut off).
    assert fast_heads == []
    assert not any(b" /cut " in r for r in origin.requests)  # no whole request, either path
    assert after.startswith(b"HTTP/1.1 200 ") and after.endswith(body)


def test_a_client_leaving_after_its_body_closes_the_upstream_on_the_fast_path(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: BodyOrigin) -> None:
    raw = leaving_closes_the_upstream(
        start_proxy_router, proxy_sessions, origin.url,
        lambda router: with_body(router, "POST", "/wait", body_of(16 * 1024)))
    assert raw.connections == 1  # not retried: nobody was left to answer


def test_shutdown_while_a_body_arrives_answers_that_request_then_closes(
        proxy_db_url: str, proxy_sessions: sessionmaker[Session], origin: BodyOrigin) -> None:
    add_app(proxy_sessions, "game", origin.url)
    body = body_of(16 * 1024)
    with served(proxy_db_url) as (router, server):
        fast = fast_path(router)
        with socket.create_connection(("127.0.0.1", router.port), timeout=10) as conn:
            answers = Answers(conn)
            conn.sendall(request(router, "/warm"))  # caches the route, through ASGI
            answers.next()
            before = fast.taken
            data = with_body(router, "POST", "/late", body)
            conn.sendall(data[:-100])
            time.sleep(0.2)  # the head is parsed, the body held
            server.should_exit = True
            time.sleep(0.3)  # the server is shutting down: the connection waits for the rest
            conn.sendall(data[-100:])
            head, answer = answers.next()
            assert answers.rest() == b""
        assert fast.taken - before == 1
    assert head.startswith(b"HTTP/1.1 200 ") and b"\r\nconnection: close\r\n" in head
    assert answer.endswith(b"\r\n\r\n" + body)
