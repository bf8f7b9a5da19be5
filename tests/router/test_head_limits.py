"""Bounded request heads (router/head_limits.py), tried on raw sockets as an attacker would.

Each refusal is checked on the three ways a head is read: by the fast protocol
(``fast``), by uvicorn's protocol from a connection's first byte (``asgi``: the fast path
off), and by uvicorn's protocol on a connection the fast protocol handed over (``handed``:
a request with a body came first). The answer is the error envelope on the API host and
the gateway page on a runtime host, the connection is closed, and the origin receives
nothing. Response heads from a hostile origin are held to the same limits.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress

import pytest
from sqlalchemy.orm import Session, sessionmaker
from websockets.exceptions import InvalidStatus

from router.head_limits import HeadLimits
from tests.factories import add_app
from tests.router.origins import RawOrigin
from tests.router.test_fast_protocol import Answers, body_echo_origin, connect, get, post
from tests.router.test_proxy_websocket import ws_connect
from tests.support.router import RouterFactory, RunningRouter

PATHS = ("fast", "asgi", "handed")
WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
LIMITS = HeadLimits()


@pytest.fixture
def origin() -> Iterator[RawOrigin]:
    with RawOrigin(body_echo_origin) as server:
        yield server


@contextmanager
def router_for(path: str, start: RouterFactory, sessions: sessionmaker[Session],
               origin: RawOrigin) -> Iterator[RunningRouter]:
    add_app(sessions, "game", origin.url)
    add_app(sessions, "other", origin.url)
    with start(proxy_fast_path=path != "asgi") as router:
        with connect(router.port) as conn:  # the apps cached: the fast path takes them
            conn.sendall(get(router.host("game"), "/warm", "Connection: close\r\n"))
            assert Answers(conn).next()[1] == b"GET /warm |"
        yield router


@contextmanager
def client(path: str, router: RunningRouter) -> Iterator[socket.socket]:
    """A connection in the state ``path`` names."""
    with connect(router.port) as conn:
        if path == "handed":
            conn.sendall(post(router.host("game"), "/first", b"abc"))
            assert Answers(conn).next()[1] == b"POST /first |abc"
        yield conn


def send_quietly(conn: socket.socket, data: bytes, piece: int = 1 << 20) -> threading.Thread:
    """Send ``data`` from a thread, stopping quietly when the router stops reading."""
    def send() -> None:
        try:
            for at in range(0, len(data), piece):
                conn.sendall(data[at:at + piece])
        except OSError:
            pass
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    return sender


def refused(conn: socket.socket, data: bytes) -> tuple[bytes, bytes]:
    """Send ``data``; the (head, body) of the answer, checking the router then closed."""
    sender = send_quietly(conn, data)
    answers = Answers(conn)
    head, body = answers.next()
    assert b"connection: close" in head.lower()
    assert answers.rest() == b""  # closed after the answer
    sender.join(10)
    return head, body


def status_of(head: bytes) -> int:
    return int(head.split(b" ", 2)[1])


def envelope(body: bytes) -> dict[str, str]:
    document = json.loads(body)
    assert isinstance(document, dict)
    return document


@pytest.mark.parametrize("path", PATHS)
def test_an_8_mb_header_on_the_api_host_gets_431_in_the_envelope(
        path: str, start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with router_for(path, start_proxy_router, proxy_sessions, origin) as router, \
            client(path, router) as conn:
        data = (f"GET /healthz HTTP/1.1\r\nHost: api.localhost:{router.port}\r\n"
                f"X-Big: ").encode() + b"a" * 8_000_000 + b"\r\n\r\n"
        head, body = refused(conn, data)
    assert status_of(head) == 431
    assert b"application/json" in head
    error = envelope(body)
    assert error["code"] == "request_header_fields_too_large"
    assert str(LIMITS.header_line) in error["message"]


@pytest.mark.parametrize("path", PATHS)
def test_a_1_mb_header_on_a_runtime_gets_the_gateway_page_and_nothing_goes_upstream(
        path: str, start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with router_for(path, start_proxy_router, proxy_sessions, origin) as router, \
            client(path, router) as conn:
        heads = len(origin.heads)
        data = (f"GET /echo HTTP/1.1\r\nHost: {router.host('game')}\r\nX-Big: ").encode() \
            + b"a" * 1_000_000 + b"\r\n\r\n"
        head, body = refused(conn, data)
        time.sleep(0.2)  # anything forwarded would have reached the origin by now
        assert len(origin.heads) == heads
    assert status_of(head) == 431
    assert b"text/html" in head and b"content-security-policy" in head
    assert b"The request headers are too large" in body


@pytest.mark.parametrize("path", PATHS)
def test_5000_headers_get_431_and_nothing_goes_upstream(
        path: str, start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with router_for(path, start_proxy_router, proxy_sessions, origin) as router, \
            client(path, router) as conn:
        heads = len(origin.heads)
        lines = "".join(f"X-H{i}: v\r\n" for i in range(5000))
        head, body = refused(conn, get(router.host("game"), "/echo", lines))
        time.sleep(0.2)
        assert len(origin.heads) == heads
    assert status_of(head) == 431
    assert f"more than {LIMITS.headers} header lines".encode() in body


@pytest.mark.parametrize("path", PATHS)
def test_two_host_headers_naming_two_apps_get_400(
        path: str, start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with router_for(path, start_proxy_router, proxy_sessions, origin) as router, \
            client(path, router) as conn:
        heads = len(origin.heads)
        head, body = refused(conn, get(router.host("game"), "/echo",
                                       f"Host: {router.host('other')}\r\n"))
        time.sleep(0.2)
        assert len(origin.heads) == heads
    assert status_of(head) == 400
    assert b"more than one Host header" in body


@pytest.mark.parametrize("path", PATHS)
def test_http_1_1_without_host_gets_400_and_http_1_0_is_asked_which_host(
        path: str, start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with router_for(path, start_proxy_router, proxy_sessions, origin) as router:
        with client(path, router) as conn:
            head, body = refused(conn, b"GET /healthz HTTP/1.1\r\nX-A: b\r\n\r\n")
            assert status_of(head) == 400
            assert envelope(body)["code"] == "bad_request"
        with connect(router.port) as conn:
            conn.sendall(b"GET / HTTP/1.0\r\n\r\n")
            head, _ = Answers(conn).next()
            assert status_of(head) == 404  # no host named: the unknown-host page


@pytest.mark.parametrize("path", PATHS)
def test_a_request_line_ending_in_a_bare_lf_gets_400_at_once(
        path: str, start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with router_for(path, start_proxy_router, proxy_sessions, origin) as router, \
            client(path, router) as conn:
        began = time.monotonic()
        conn.sendall(f"GET /echo HTTP/1.1\nHost: {router.host('game')}\r\n\r\n".encode())
        answers = Answers(conn)
        head, _ = answers.next()
        assert answers.rest() == b""
        assert time.monotonic() - began < 2  # not the 5 s keep-alive timeout
    assert status_of(head) == 400


@pytest.mark.parametrize("path", PATHS)
def test_a_long_request_line_gets_414(
        path: str, start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with router_for(path, start_proxy_router, proxy_sessions, origin) as router, \
            client(path, router) as conn:
        head, body = refused(conn, get(f"api.localhost:{router.port}",
                                       "/healthz?" + "q" * (LIMITS.request_line + 10)))
    assert status_of(head) == 414
    assert envelope(body)["code"] == "uri_too_long"


@pytest.mark.parametrize("path", PATHS)
def test_heads_at_the_limits_are_served(
        path: str, start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    """The limits refuse nothing a browser sends: an 8,000-byte cookie, 99 more headers,
    a long URL."""
    with router_for(path, start_proxy_router, proxy_sessions, origin) as router, \
            client(path, router) as conn:
        answers = Answers(conn)
        cookie = "Cookie: c=" + "k" * (LIMITS.header_line - 10) + "\r\n"
        conn.sendall(get(router.host("game"), "/cookie", cookie))
        assert answers.next()[1] == b"GET /cookie |"
        lines = "".join(f"X-H{i}: v\r\n" for i in range(LIMITS.headers - 1))  # + Host
        conn.sendall(get(router.host("game"), "/many", lines))
        assert answers.next()[1] == b"GET /many |"
        target = "/long?" + "q" * (LIMITS.request_line - 100)
        conn.sendall(get(router.host("game"), target))
        assert answers.next()[1] == b"GET " + target.encode() + b" |"


@pytest.mark.parametrize("path", PATHS)
def test_a_head_dripping_in_is_refused_once_over_the_limit_not_at_its_end(
        path: str, start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with router_for(path, start_proxy_router, proxy_sessions, origin) as router, \
            client(path, router) as conn:
        conn.sendall(f"GET /echo HTTP/1.1\r\nHost: {router.host('game')}\r\n".encode())
        sent = 0
        conn.settimeout(0.05)
        answer = b""
        while not answer and sent < 10 * LIMITS.head:
            conn.sendall(b"X-Drip: " + b"d" * 1000 + b"\r\n")  # never the blank line
            sent += 1010
            with suppress(TimeoutError):
                answer = conn.recv(65536)
        conn.settimeout(10)
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert sent <= LIMITS.head + 64 * 1024  # refused about when the limit was crossed


@pytest.mark.parametrize("path", PATHS)
def test_a_bad_head_pipelined_behind_a_good_request_is_refused_after_its_answer(
        path: str, start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with router_for(path, start_proxy_router, proxy_sessions, origin) as router, \
            client(path, router) as conn:
        heads = len(origin.heads)
        lines = "".join(f"X-H{i}: v\r\n" for i in range(LIMITS.headers + 1))
        sender = send_quietly(conn, get(router.host("game"), "/good")
                              + get(router.host("game"), "/bad", lines))
        answers = Answers(conn)
        assert answers.next()[1] == b"GET /good |"
        head, _ = answers.next()
        assert status_of(head) == 431
        assert answers.rest() == b""
        sender.join(10)
        time.sleep(0.2)
        assert len(origin.heads) == heads + 1  # only /good


@pytest.mark.parametrize("path", ["fast", "asgi"])
def test_a_websocket_upgrade_with_a_huge_header_is_refused(
        path: str, start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with router_for(path, start_proxy_router, proxy_sessions, origin) as router, \
            client(path, router) as conn:
        heads = len(origin.heads)
        upgrade = ("Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nX-Big: "
                   + "w" * 100_000 + "\r\n")
        head, _ = refused(conn, get(router.host("game"), "/ws", upgrade))
        time.sleep(0.2)
        assert len(origin.heads) == heads
    assert status_of(head) == 431


def test_the_limits_are_settings(start_proxy_router: RouterFactory,
                                 proxy_sessions: sessionmaker[Session],
                                 origin: RawOrigin) -> None:
    add_app(proxy_sessions, "game", origin.url)
    with start_proxy_router(max_header_line=1024, max_headers=20) as router:
        with connect(router.port) as conn:
            head, _ = refused(conn, get(router.host("game"), "/x",
                                        "X-A: " + "a" * 1100 + "\r\n"))
            assert status_of(head) == 431
        with connect(router.port) as conn:
            head, _ = refused(conn, get(router.host("game"), "/x",
                                        "".join(f"X-{i}: v\r\n" for i in range(21))))
            assert status_of(head) == 431


def rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_200_connections_sending_1_mb_heads_do_not_grow_the_process(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    """The router runs in this process: all 200 heads in flight at once would hold 200 MB
    if heads were read to their end."""
    add_app(proxy_sessions, "game", origin.url)
    with start_proxy_router() as router:
        data = (f"GET /echo HTTP/1.1\r\nHost: {router.host('game')}\r\nX-Big: ".encode()
                + b"m" * (1 << 20))  # no end: the head is never complete

        held: list[socket.socket] = []  # open until measured: nothing is freed by a close

        def attack(_: int) -> bytes:
            conn = connect(router.port)
            held.append(conn)
            with suppress(OSError):
                conn.sendall(data)
            return conn.recv(100)

        try:
            with ThreadPoolExecutor(20) as pool:
                assert list(pool.map(attack, range(20)))  # warm: threads, buffers
                before = rss_bytes()
                answers = list(pool.map(attack, range(200)))
                after = rss_bytes()
        finally:
            for conn in held:
                conn.close()
    assert all(a.startswith(b"HTTP/1.1 431 ") for a in answers)
    assert after - before < 8 * 1024 * 1024, f"grew by {(after - before) >> 20} MB"


async def endless_header_origin(origin: RawOrigin, reader: asyncio.StreamReader,
                                writer: asyncio.StreamWriter) -> None:
    await origin.read_head(reader)
    writer.write(b"HTTP/1.1 200 OK\r\nX-Endless: ")
    try:
        for _ in range(2000):  # 128 MB unless the router hangs up
            writer.write(b"e" * 65536)
            await writer.drain()
    except OSError:
        origin.cut = True  # type: ignore[attr-defined]


async def many_headers_origin(origin: RawOrigin, reader: asyncio.StreamReader,
                              writer: asyncio.StreamWriter) -> None:
    await origin.read_head(reader)
    count = 5000 if b"/many" in origin.heads[-1] else LIMITS.headers - 2
    lines = b"".join(b"X-O%d: v\r\n" % i for i in range(count))
    writer.write(b"HTTP/1.1 200 OK\r\n" + lines + b"Content-Length: 2\r\n\r\nok")
    await writer.drain()
    writer.close()


@pytest.mark.parametrize("path", ["fast", "asgi"])
def test_an_origin_sending_an_endless_header_gets_cut_off_with_a_502(
        path: str, start_proxy_router: RouterFactory,
        proxy_sessions: sessionmaker[Session]) -> None:
    with RawOrigin(endless_header_origin) as origin, \
            router_for_raw(path, start_proxy_router, proxy_sessions, origin) as router:
        began = time.monotonic()
        with router.client("game") as http:
            answer = http.get("/endless")
        assert answer.status_code == 502
        assert time.monotonic() - began < 5
        deadline = time.monotonic() + 5
        while not getattr(origin, "cut", False):
            assert time.monotonic() < deadline, "the router kept reading the header"
            time.sleep(0.05)


@pytest.mark.parametrize("path", ["fast", "asgi"])
def test_an_origin_sending_5000_headers_gets_a_502_and_a_normal_one_passes(
        path: str, start_proxy_router: RouterFactory,
        proxy_sessions: sessionmaker[Session]) -> None:
    with RawOrigin(many_headers_origin) as origin, \
            router_for_raw(path, start_proxy_router, proxy_sessions, origin) as router, \
            router.client("game") as http:
        assert http.get("/many").status_code == 502
        fine = http.get("/fine")
        assert fine.status_code == 200 and fine.text == "ok"
        assert fine.headers["x-o0"] == "v"


@contextmanager
def router_for_raw(path: str, start: RouterFactory, sessions: sessionmaker[Session],
                   origin: RawOrigin, **settings: object) -> Iterator[RunningRouter]:
    add_app(sessions, "game", origin.url)
    with start(proxy_fast_path=path != "asgi", **settings) as router:
        yield router


async def ws_many_headers_origin(origin: RawOrigin, reader: asyncio.StreamReader,
                                 writer: asyncio.StreamWriter) -> None:
    """Answers a WebSocket handshake, correctly but with 30 more header lines (10 when the
    path says ``/few``)."""
    head = await origin.read_head(reader)
    key = next(line.split(b":", 1)[1].strip() for line in head.split(b"\r\n")
               if line.lower().startswith(b"sec-websocket-key:"))
    accept = base64.b64encode(hashlib.sha1(key + WS_GUID).digest())  # noqa: S324 (RFC 6455)
    count = 10 if b" /few" in head else 30
    lines = b"".join(b"X-O%d: v\r\n" % i for i in range(count))
    writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                 b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n"
                 + lines + b"\r\n")
    await writer.drain()
    await asyncio.sleep(2)
    writer.close()


def test_a_websocket_origin_answering_over_the_header_limit_is_refused_like_an_unreachable_one(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session]) -> None:
    """With ``SVCSRV_MAX_HEADERS=20`` (aiohttp alone would take 128 lines)."""
    with RawOrigin(ws_many_headers_origin) as origin, \
            router_for_raw("fast", start_proxy_router, proxy_sessions, origin,
                           max_headers=20) as router:
        began = time.monotonic()
        with pytest.raises(InvalidStatus) as refused, ws_connect(router):
            pass
        assert refused.value.response.status_code == 403  # the close before accept
        assert time.monotonic() - began < 2  # not waiting for the origin to hang up
        with ws_connect(router, "/few"):
            pass  # the same handshake under the limits is relayed
