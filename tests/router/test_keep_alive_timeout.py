"""``SVCSRV_KEEP_ALIVE_TIMEOUT`` closes idle client connections on both HTTP paths.

A bodyless request leaves its connection on the router's own protocol
(router/fast_protocol.py); a request with a chunked body hands the connection to uvicorn's
(router/server_protocol.py). Each path is shown closing an idle connection after the set
timeout, 1 s, well before uvicorn's 5 s default, and keeping it open when the timeout is
longer than the wait. (That the value reaches uvicorn's Config is tests/unit/test_settings.py.)
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.router.origins import RawOrigin, proxied
from tests.support.router import RouterFactory, RunningRouter


async def small_origin(origin: RawOrigin, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> None:
    while True:
        head = await origin.read_head(reader)
        if head.startswith(b"GET /slow "):
            await asyncio.sleep(SLOW_ANSWER)
        for line in head.lower().split(b"\r\n"):
            if line.startswith(b"content-length:"):
                await reader.readexactly(int(line.split(b":", 1)[1]))
            elif line.startswith(b"transfer-encoding:"):
                await reader.readuntil(b"0\r\n\r\n")  # the bench's one small chunk
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()


@pytest.fixture
def origin() -> Iterator[RawOrigin]:
    with RawOrigin(small_origin) as server:
        yield server


GET = "GET / HTTP/1.1\r\nHost: {host}\r\n\r\n"
SLOW_GET = "GET /slow HTTP/1.1\r\nHost: {host}\r\n\r\n"
SLOW_ANSWER = 1.6  # seconds: longer than the 1 s timeout
# Chunked: a body the fast protocol does not hold hands the connection to uvicorn's.
POST = ("POST / HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n\r\n"
        "3\r\nabc\r\n0\r\n\r\n")


def answered_then_idle(router: RunningRouter, request: str, idle: float) -> bool:
    """Send one request, read its answer, wait ``idle`` s: is the connection still open?"""
    with socket.create_connection(("127.0.0.1", router.port), timeout=5) as conn:
        conn.sendall(request.format(host=router.host("game")).encode())
        received = b""
        while not received.endswith(b"\r\n\r\nok"):
            chunk = conn.recv(4096)
            assert chunk, f"closed before the answer: {received!r}"
            received += chunk
        assert received.startswith(b"HTTP/1.1 200 ")
        time.sleep(idle)
        conn.settimeout(0.2)
        try:
            return conn.recv(1) != b""  # b"": the router closed it
        except TimeoutError:
            return True  # nothing to read and not closed
        except ConnectionResetError:
            return False


@pytest.mark.parametrize("request_text", [GET, POST], ids=["fast-protocol", "uvicorn-protocol"])
def test_idle_connection_closed_after_the_set_timeout(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin, request_text: str) -> None:
    with proxied(start_proxy_router, proxy_sessions, origin.url,
                 keep_alive_timeout=1) as router:
        # Cache the route first: the GET then stays on the fast protocol.
        assert answered_then_idle(router, GET, 0)
        assert not answered_then_idle(router, request_text, 1.8)


def test_idle_connection_kept_while_the_timeout_runs(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with proxied(start_proxy_router, proxy_sessions, origin.url,
                 keep_alive_timeout=3) as router:
        # 1.8 s idle: closed with a 1 s timeout (above), open with 3 s.
        assert answered_then_idle(router, GET, 1.8)
        assert answered_then_idle(router, POST, 1.8)


def test_the_timeout_counts_from_the_answer_not_through_a_slow_one(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    """A request in flight longer than the timeout is not cut (fast protocol): the
    connection is idle from its answer on, and closed a timeout after that."""
    with proxied(start_proxy_router, proxy_sessions, origin.url,
                 keep_alive_timeout=1) as router:
        assert answered_then_idle(router, GET, 0)  # the route cached: the fast protocol
        assert answered_then_idle(router, SLOW_GET, 0.5)
        assert not answered_then_idle(router, SLOW_GET, 1.8)
