"""uvicorn's httptools protocol, sending a response head together with what follows it.

uvicorn writes ``http.response.start`` to the socket at once and the body in a second
write; uvloop sends each write immediately, so every response costs two ``write``
syscalls and two TCP segments, and waking the reader twice is the dearest part of a
loopback write (bench/proxy_bench.py, measured with perf). Here a write is held until
the next write of the same connection or the end of the current loop iteration,
whichever comes first: a head and a body sent in one go leave in one ``writev``, and
nothing waits longer than the iteration that produced it.

Connections start with ``router/fast_protocol.py``, which serves the runtime fast path
itself and hands every other request to this protocol; :func:`frame_whole` is how it
frames an answer exactly as uvicorn's ``send`` would.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import (
    HEADER_RE,
    HEADER_VALUE_RE,
    STATUS_LINE,
    HttpToolsProtocol,
)

from router.headers import Headers


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

    def write_now(self, data: bytes) -> None:
        """Write ``data`` at once, after what was held."""
        held = self._held
        if held is None:
            self._transport.write(data)
        else:
            self._held = None
            self._transport.writelines((held, data))

    def is_closing(self) -> bool:
        return self._transport.is_closing()


# Header names and values already checked against uvicorn's HEADER_RE and HEADER_VALUE_RE:
# origins send the same few names, and mostly the same values, on every answer, and the
# checks were the dearest part of framing one (bench/proxy_bench.py). Bounded, so an
# origin inventing names or values only costs the check.
MAX_VALID_NAMES = 1024
MAX_VALID_VALUES = 4096
MAX_VALID_VALUE_LENGTH = 256
_VALID_NAMES: set[bytes] = set()
_VALID_VALUES: set[bytes] = set()


def frame_whole(status: int, headers: Headers, body: bytes,
                default_headers: Headers, *, head_only: bool, keep_alive: bool) -> bytes | None:
    """The bytes uvicorn's ``send`` writes for a start message and a final body message.

    None whenever ``send`` would do anything else than frame a plain answer: refuse a
    header or status, frame chunks, honour a ``Connection`` header, or fail on a length
    mismatch. The caller then sends through a request cycle, which does exactly that.
    """
    line = STATUS_LINE.get(status)
    if line is None:
        return None
    if default_headers:
        headers = default_headers + headers
    length: bytes | None = None
    parts = [line]
    bad_value = HEADER_VALUE_RE.search
    for name, value in headers:
        if name == b"content-length":
            length = value if length is None else length
        elif name == b"connection" or name == b"transfer-encoding":
            return None
        if name not in _VALID_NAMES:
            if HEADER_RE.search(name):
                return None
            if len(_VALID_NAMES) < MAX_VALID_NAMES:
                _VALID_NAMES.add(name)
        if value not in _VALID_VALUES:
            if bad_value(value):
                return None
            if len(value) <= MAX_VALID_VALUE_LENGTH and len(_VALID_VALUES) < MAX_VALID_VALUES:
                _VALID_VALUES.add(value)
        parts += (name, b": ", value, b"\r\n")
    if not head_only:
        if length is None:
            # send adds chunked framing unless the status carries no body
            if body or status not in (204, 304):
                return None
        elif not length.isdigit() or int(length) != len(body):
            return None
    if not keep_alive:
        parts.append(b"connection: close\r\n")
    parts.append(b"\r\n")
    if body and not head_only:
        parts.append(body)
    return b"".join(parts)


class HttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, giving every request cycle the held-writes view of
    the connection's transport."""

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
