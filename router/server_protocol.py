"""uvicorn's httptools protocol, sending a response head together with what follows it.

uvicorn writes ``http.response.start`` to the socket at once and the body in a second
write; uvloop sends each write immediately, so every response costs two ``write``
syscalls and two TCP segments, and waking the reader twice is the dearest part of a
loopback write (bench/proxy_bench.py, measured with perf). Here a write is held until
the next write of the same connection or the end of the current loop iteration,
whichever comes first: a head and a body sent in one go leave in one ``writev``, and
nothing waits longer than the iteration that produced it.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class HeldWrites:
    """The part of a transport a uvicorn request cycle uses, holding one write back."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is None:
            self._held = data
            self._loop.call_soon(self.flush)
        else:
            self._held = None
            self._transport.writelines((held, data))

    def flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()


class HttpProtocol(HttpToolsProtocol):
    """Give every request cycle the held-writes view of the connection's transport."""

    _writes: HeldWrites

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._writes = HeldWrites(transport, self.loop)

    def on_headers_complete(self) -> None:
        previous = self.cycle
        super().on_headers_complete()
        if self.cycle is not previous:  # a new request (not a WebSocket upgrade)
            self.cycle.transport = self._writes  # type: ignore[assignment]

    # Where uvicorn writes to the transport itself, what was held goes first.
    def shutdown(self) -> None:
        self._writes.flush()
        super().shutdown()

    def send_400_response(self, msg: str) -> None:
        self._writes.flush()
        super().send_400_response(msg)

    def handle_websocket_upgrade(self) -> None:
        self._writes.flush()
        super().handle_websocket_upgrade()
