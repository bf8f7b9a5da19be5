"""The tests' own servers, stopped as a connection arrives, leave no socket open.

Such a socket is found by the collector in whatever test runs next, and with warnings as
errors that test fails on a ResourceWarning it has nothing to do with. The window is held
open here: the server's loop is kept busy while a client connects, so the stop and the
accept fall in the same turns.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import sys
from collections.abc import Callable

import pytest
from aiohttp import web

from tests.router.origins import RawOrigin
from tests.support.servers import AiohttpServer, hold_loop

Server = AiohttpServer | RawOrigin


def aiohttp_server() -> Server:
    return AiohttpServer(web.Application())


def raw_origin() -> Server:
    async def handle(origin: RawOrigin, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        await reader.read()
    return RawOrigin(handle)


def unraisable_after_collecting() -> list[str]:
    """What the collector reports as ignored (unclosed sockets and transports among it)."""
    seen: list[str] = []
    previous = sys.unraisablehook
    sys.unraisablehook = lambda u: seen.append(f"{u.exc_value!r} in {u.object!r}")
    try:
        gc.collect()
    finally:
        sys.unraisablehook = previous
    return seen


@pytest.mark.parametrize("make", [aiohttp_server, raw_origin], ids=["aiohttp", "raw"])
def test_a_connection_arriving_as_the_server_stops_is_closed(
        make: Callable[[], Server]) -> None:
    unraisable_after_collecting()  # earlier garbage is not this test's
    clients = []
    with make() as server:
        hold_loop(server.loop, 0.3)  # the loop busy...
        for _ in range(3):  # ...while clients connect (the kernel completes them) and the
            # stop is asked for: the loop then takes both in the same turns
            clients.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
    for client in clients:
        client.settimeout(5)
        assert client.recv(1) == b"", "the server's side was not closed"
        client.close()
    assert unraisable_after_collecting() == []
