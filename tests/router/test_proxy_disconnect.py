"""A client that leaves before the origin answered frees the origin's connection at once.

The origin accepts the request and never answers; the read timeout is long, so only the
client's departure can close the upstream connection.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.router.origins import RawOrigin, proxied
from tests.support.router import RouterFactory, RunningRouter

READ_TIMEOUT = 60.0  # never what closes the connection here
PROMPT = 2.0  # the origin must see its connection closed this soon after the client left


class SilentOrigin:
    """Reads one request (head and declared body), never answers, notes when it is closed."""

    def __init__(self) -> None:
        self.got_request = threading.Event()
        self.closed = threading.Event()
        self.closed_at: list[float] = []

    async def handle(self, origin: RawOrigin, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        head = await origin.read_head(reader)
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                await reader.readexactly(int(value))
        self.got_request.set()
        give_up = time.monotonic() + READ_TIMEOUT  # bounded: a failure cannot hang teardown
        while time.monotonic() < give_up:
            try:
                data = await asyncio.wait_for(reader.read(1), timeout=0.2)
            except TimeoutError:
                continue
            if not data:
                break
        self.closed_at.append(time.monotonic())
        self.closed.set()


def leave_before_the_answer(router: RunningRouter, origin: SilentOrigin,
                            request: bytes) -> float:
    """Send ``request``, wait until the origin has it, hang up; when the client left."""
    with socket.create_connection(("127.0.0.1", router.port), timeout=5) as client:
        client.sendall(request)
        assert origin.got_request.wait(5), "the request never reached the origin"
        time.sleep(0.3)  # the router is now waiting for the origin's answer
        left_at = time.monotonic()
    return left_at


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_client_leaving_before_the_answer_closes_the_upstream(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        method: str) -> None:
    silent = SilentOrigin()
    with RawOrigin(silent.handle) as raw, \
            proxied(start_proxy_router, proxy_sessions, raw.url,
                    proxy_read_timeout=READ_TIMEOUT) as router:
        body = b"payload" if method == "POST" else b""
        request = (f"{method} /wait HTTP/1.1\r\nHost: {router.host('game')}\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        left_at = leave_before_the_answer(router, silent, request)
        assert silent.closed.wait(PROMPT + 3), "the origin's connection stayed open"
        assert silent.closed_at[0] - left_at < PROMPT
    assert raw.connections == 1  # not retried: nobody was left to answer
