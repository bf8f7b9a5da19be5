"""The connection-level protocol of router/fast_protocol.py: what it serves itself, what it
hands to uvicorn (from the declined request's first byte, for the rest of the connection),
and the connection life it keeps in between (pipelining with read back-pressure, the
keep-alive timeout, graceful shutdown).

Every test runs the real router under uvicorn on loopback in front of a hand-written
origin, and counts the requests the fast path planned (``FastPath.taken``) so that a rule
shown here is shown for the protocol it names.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import uvicorn
from sqlalchemy.orm import Session, sessionmaker

from router.app import create_app
from router.cli import server_config
from router.fast_path import FastPath
from router.fast_protocol import MAX_BODY, MAX_BUFFER
from router.upstream_client import UpstreamClient
from tests.factories import add_app
from tests.router.origins import RawOrigin
from tests.support.router import RouterFactory, RunningRouter, router_settings

SLOW_SECONDS = 0.4


async def body_echo_origin(origin: RawOrigin, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter) -> None:
    """Keep-alive answers naming the request and echoing its body; ``/slow`` waits first."""
    while True:
        head = await origin.read_head(reader)
        method, target = head.split(b" ", 2)[:2]
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await reader.readexactly(length) if length else b""
        if target == b"/slow":
            await asyncio.sleep(SLOW_SECONDS)
        answer = method + b" " + target + b" |" + body
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(answer), answer))
        await writer.drain()


@pytest.fixture
def origin() -> Iterator[RawOrigin]:
    with RawOrigin(body_echo_origin) as server:
        yield server


def get(router_host: str, target: str, extra: str = "") -> bytes:
    return f"GET {target} HTTP/1.1\r\nHost: {router_host}\r\n{extra}\r\n".encode()


def post(router_host: str, target: str, body: bytes, extra: str = "") -> bytes:
    return (f"POST {target} HTTP/1.1\r\nHost: {router_host}\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body


class Answers:
    """Reads answers (Content-Length framed) off one client connection."""

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self._buffer = b""

    def _fill(self) -> bool:
        chunk = self._conn.recv(65536)
        self._buffer += chunk
        return bool(chunk)

    def next(self) -> tuple[bytes, bytes]:
        """(head, body) of the next answer."""
        while (end := self._buffer.find(b"\r\n\r\n")) < 0:
            assert self._fill(), "the router closed the connection before an answer"
        head = self._buffer[:end + 4]
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        while len(self._buffer) < end + 4 + length:
            assert self._fill(), "the router closed the connection mid-answer"
        body = self._buffer[end + 4:end + 4 + length]
        self._buffer = self._buffer[end + 4 + length:]
        return head, body

    def rest(self) -> bytes:
        """Everything until the router closes the connection."""
        while self._fill():
            pass
        rest, self._buffer = self._buffer, b""
        return rest


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def fast_of(router: RunningRouter) -> FastPath:
    fast = router.service.fast_path
    assert fast is not None
    return fast


@contextmanager
def warm(start: RouterFactory, sessions: sessionmaker[Session],
         origin: RawOrigin) -> Iterator[RunningRouter]:
    """A router whose cache holds the app (the first request is looked up through ASGI)."""
    add_app(sessions, "game", origin.url)
    with start() as router, connect(router.port) as conn:
        conn.sendall(get(router.host("game"), "/warm", "Connection: close\r\n"))
        assert Answers(conn).next()[1] == b"GET /warm |"
        yield router


def test_a_declined_request_hands_the_connection_over_from_its_first_byte(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with warm(start_proxy_router, proxy_sessions, origin) as router:
        host, fast = router.host("game"), fast_of(router)
        before = fast.taken
        upload = b"u" * (MAX_BODY + 1)  # over what the fast protocol holds
        with connect(router.port) as conn:
            answers = Answers(conn)
            bodies = []
            for data in (get(host, "/one"), post(host, "/upload", upload), get(host, "/two"),
                         get(host, "/three", "Connection: close\r\n")):
                conn.sendall(data)
                bodies.append(answers.next()[1])
            assert answers.rest() == b""
        # Only the first was the fast protocol's: from the upload on, uvicorn owns the
        # connection, and every request still reaches the origin, body included.
        assert fast.taken - before == 1
    assert bodies == [b"GET /one |", b"POST /upload |" + upload, b"GET /two |",
                      b"GET /three |"]


def test_pipelined_requests_keep_their_order_across_the_hand_over(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with warm(start_proxy_router, proxy_sessions, origin) as router:
        host, fast = router.host("game"), fast_of(router)
        before = fast.taken
        upload = b"u" * (MAX_BODY + 1)  # handed over: over what the fast protocol holds
        with connect(router.port) as conn:
            conn.sendall(get(host, "/a") + post(host, "/b", b"xyz") + post(host, "/c", upload)
                         + get(host, "/d", "Connection: close\r\n"))
            answers = Answers(conn)
            bodies = [answers.next()[1] for _ in range(4)]
            assert answers.rest() == b""
        assert fast.taken - before == 2
    assert bodies == [b"GET /a |", b"POST /b |xyz", b"POST /c |" + upload, b"GET /d |"]


def test_another_host_or_a_cache_miss_is_answered_through_asgi_on_the_same_connection(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with warm(start_proxy_router, proxy_sessions, origin) as router:
        host, fast = router.host("game"), fast_of(router)
        api_host = f"api.localhost:{router.port}"
        add_app(proxy_sessions, "other", origin.url)  # not cached yet: a miss
        other_host = router.host("other")
        before = fast.taken
        with connect(router.port) as conn:
            answers = Answers(conn)
            conn.sendall(get(host, "/x"))
            assert answers.next()[1] == b"GET /x |"
            heads_before = len(origin.heads)
            conn.sendall(get(api_host, "/healthz"))
            head, body = answers.next()
            assert head.startswith(b"HTTP/1.1 200 ") and b'"ok"' in body
            assert len(origin.heads) == heads_before  # answered by the service, not proxied
            conn.sendall(get(other_host, "/miss"))
            assert answers.next()[1] == b"GET /miss |"  # looked up and proxied by ASGI
            conn.sendall(get(host, "/y") + get(other_host, "/hit", "Connection: close\r\n"))
            assert answers.next()[1] == b"GET /y |"
            assert answers.next()[1] == b"GET /hit |"
            assert answers.rest() == b""
        # /x, /y and /hit (now cached) were the fast path's: the connection stayed with it.
        assert fast.taken - before == 3


def test_a_malformed_request_after_a_fast_one_gets_uvicorns_400(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with warm(start_proxy_router, proxy_sessions, origin) as router:
        host, fast = router.host("game"), fast_of(router)
        before = fast.taken
        with connect(router.port) as conn:
            answers = Answers(conn)
            conn.sendall(get(host, "/y"))
            assert answers.next()[1] == b"GET /y |"
            conn.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            head, body = answers.next()
            assert head.startswith(b"HTTP/1.1 400 ") and body == b"Invalid HTTP request received."
            assert answers.rest() == b""
        assert fast.taken - before == 1


def test_pipelined_requests_behind_a_slow_answer_pause_reading_and_all_get_answers(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with warm(start_proxy_router, proxy_sessions, origin) as router:
        host, fast = router.host("game"), fast_of(router)
        pad = "X-Pad: " + "p" * 400 + "\r\n"
        count = 400
        data = get(host, "/slow") + b"".join(get(host, f"/n{i}", pad) for i in range(count))
        assert len(data) > 2 * MAX_BUFFER  # more than the protocol holds without pausing
        before = fast.taken
        with connect(router.port) as conn:
            # A client that pipelines reads while it sends, as HTTP requires of it.
            sender = threading.Thread(target=conn.sendall, args=(data,))
            sender.start()
            answers = Answers(conn)
            bodies = [answers.next()[1] for _ in range(count + 1)]
            sender.join(10)
        assert fast.taken - before == count + 1
    assert bodies == [b"GET /slow |"] + [f"GET /n{i} |".encode() for i in range(count)]


@contextmanager
def served(db_url: str, **uvicorn_options: object) -> Iterator[tuple[RunningRouter,
                                                                      uvicorn.Server]]:
    """The router as ``svc-server`` runs it, with uvicorn options and the server at hand."""
    settings = router_settings(db_url)
    service = create_app(settings)
    server = uvicorn.Server(server_config(service, settings, log_level="warning",
                                          **uvicorn_options))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "router did not start"
        time.sleep(0.01)
    try:
        yield RunningRouter(f"http://{settings.bind_host}:{settings.bind_port}",
                            settings.bind_port, service, settings), server
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        assert not thread.is_alive()


def test_an_idle_connection_is_closed_after_the_keep_alive_timeout_and_a_busy_one_is_not(
        proxy_db_url: str, proxy_sessions: sessionmaker[Session], origin: RawOrigin) -> None:
    add_app(proxy_sessions, "game", origin.url)
    with served(proxy_db_url, timeout_keep_alive=1) as (router, _):
        host, fast = router.host("game"), fast_of(router)
        with connect(router.port) as warmup:
            warmup.sendall(get(host, "/warm", "Connection: close\r\n"))
            Answers(warmup).rest()
        before = fast.taken
        with connect(router.port) as busy, connect(router.port) as idle:
            idle_answers, busy_answers = Answers(idle), Answers(busy)
            idle.sendall(get(host, "/idle"))
            assert idle_answers.next()[1] == b"GET /idle |"
            idle.settimeout(0.2)
            with pytest.raises(TimeoutError):
                idle.recv(1)  # open, and quiet, right after its answer
            for i in range(6):  # 2.4 s of requests 0.4 s apart, each within the timeout
                busy.sendall(get(host, f"/busy{i}"))
                assert busy_answers.next()[1] == f"GET /busy{i} |".encode()
                time.sleep(0.4)
            assert idle.recv(1) == b""  # closed by the router meanwhile: EOF at once
            busy.sendall(get(host, "/still-open", "Connection: close\r\n"))
            assert busy_answers.next()[1] == b"GET /still-open |"
        # The cache entry (TTL 1 s here) is refreshed ahead only by a request in the last
        # quarter of its life; requests 0.4 s apart can step over that window, and such a
        # miss is answered through ASGI on the same connection: not every one is counted.
        assert fast.taken - before >= 5


def test_shutdown_lets_the_answer_in_flight_finish_then_closes(
        proxy_db_url: str, proxy_sessions: sessionmaker[Session], origin: RawOrigin) -> None:
    add_app(proxy_sessions, "game", origin.url)
    with served(proxy_db_url) as (router, server):
        host, fast = router.host("game"), fast_of(router)
        with connect(router.port) as conn:
            answers = Answers(conn)
            conn.sendall(get(host, "/warm"))
            assert answers.next()[1] == b"GET /warm |"
            before = fast.taken
            conn.sendall(get(host, "/slow"))
            time.sleep(SLOW_SECONDS / 4)  # the request is at the origin now
            server.should_exit = True
            head, body = answers.next()
            assert answers.rest() == b""
        assert fast.taken - before == 1
    assert head.startswith(b"HTTP/1.1 200 ") and body == b"GET /slow |"
    assert b"\r\nconnection: close\r\n" in head


def test_a_failing_fast_plan_is_logged_and_the_request_answered_through_asgi(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("a bug in the fast path")

    with warm(start_proxy_router, proxy_sessions, origin) as router:
        host = router.host("game")
        # The fault is put in what plan() calls: the fast path's own classes are compiled
        # (router/native.py), and a compiled method cannot be patched. Only plan() asks
        # the directory for cached(); the ASGI path uses get().
        directory = router.service.resources.directory
        assert directory is not None
        monkeypatch.setattr(directory, "cached", broken)
        with connect(router.port) as conn:
            answers = Answers(conn)
            conn.sendall(get(host, "/a") + get(host, "/b", "Connection: close\r\n"))
            assert [answers.next()[1] for _ in range(2)] == [b"GET /a |", b"GET /b |"]
            assert answers.rest() == b""
    failures = [r for r in caplog.records if r.getMessage() == "fast path plan failed"]
    assert len(failures) == 2 and failures[0].exc_info is not None


def test_a_failing_exchange_start_is_logged_and_the_request_answered_the_ordinary_way(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    with warm(start_proxy_router, proxy_sessions, origin) as router:
        host = router.host("game")
        proxy = fast_of(router).proxy
        client = proxy.client
        asked: list[str] = []

        def broken() -> UpstreamClient:
            # FastExchange.start() asks first, then the ASGI path it falls back to: the
            # fault is put in what start() calls, as compiled methods cannot be patched.
            asked.append("client")
            if len(asked) % 2:
                raise RuntimeError("a bug in the fast exchange")
            return client()

        monkeypatch.setattr(proxy, "client", broken)
        with connect(router.port) as conn:
            answers = Answers(conn)
            conn.sendall(get(host, "/a") + get(host, "/b", "Connection: close\r\n"))
            assert [answers.next()[1] for _ in range(2)] == [b"GET /a |", b"GET /b |"]
            assert answers.rest() == b""
    failures = [r for r in caplog.records if r.getMessage() == "fast exchange start failed"]
    assert len(failures) == 2 and len(asked) == 4


def test_a_connection_silent_before_its_first_request_is_closed_after_the_timeout(
        proxy_db_url: str, proxy_sessions: sessionmaker[Session], origin: RawOrigin) -> None:
    add_app(proxy_sessions, "game", origin.url)
    with served(proxy_db_url, timeout_keep_alive=1) as (router, _), \
            connect(router.port) as silent, connect(router.port) as slow:
        silent.settimeout(0.3)
        with pytest.raises(TimeoutError):
            silent.recv(1)  # open at first
        head = get(router.host("game"), "/late", "Connection: close\r\n")
        chunks = [head[i:i + 8] for i in range(0, len(head), 8)]
        for chunk in chunks[:5]:  # 1.5 s of a head trickling in, each gap under the timeout
            slow.sendall(chunk)
            time.sleep(0.3)
        slow.sendall(b"".join(chunks[5:]))
        silent.settimeout(3)
        assert silent.recv(1) == b""  # closed by the router about 1 s after it connected
        assert Answers(slow).next()[1] == b"GET /late |"


def test_a_client_over_ipv6_is_named_as_uvicorn_names_it(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    """The protocol takes the client's address from what the transport saved when it
    accepted the connection, not from uvicorn's helpers: an IPv6 peer (a 4-tuple there)
    reaches the origin as uvicorn's helpers name it, on the ASGI path (a cache miss) and
    on the fast path."""
    add_app(proxy_sessions, "game", origin.url)
    with start_proxy_router(bind_host="::1") as router, \
            socket.create_connection(("::1", router.port), timeout=10) as conn:
        fast, host = fast_of(router), router.host("game")
        answers = Answers(conn)
        conn.sendall(get(host, "/miss"))  # looked up and proxied through ASGI
        assert answers.next()[1] == b"GET /miss |"
        taken = fast.taken
        conn.sendall(get(host, "/hit"))
        assert answers.next()[1] == b"GET /hit |"
        assert fast.taken == taken + 1
    forwarded = [line for head in origin.heads[-2:] for line in head.lower().split(b"\r\n")
                 if line.startswith(b"x-forwarded-for:")]
    assert forwarded == [b"x-forwarded-for: ::1", b"x-forwarded-for: ::1"]
