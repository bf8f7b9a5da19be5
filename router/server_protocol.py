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
from typing import Any

import httptools
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import (
    HEADER_RE,
    HEADER_VALUE_RE,
    STATUS_LINE,
    HttpToolsProtocol,
)

from router.head_limits import (
    HeadLimits,
    HeadRefused,
    head_too_large,
    host_count_refused,
    line_too_long,
    request_line_too_long,
    too_many_headers,
)
from router.head_policy import HeadPolicy
from router.headers import Headers
from router.lingering import answer_and_linger


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


def head_policy(config: Config) -> HeadPolicy:
    """The service's head limits and refusal answers; the default limits, answered in the
    error envelope, for an application that is not the service (or is wrapped)."""
    policy = getattr(config.loaded_app, "head_policy", None)
    return policy if isinstance(policy, HeadPolicy) else HeadPolicy(HeadLimits(), None)


class HttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, giving every request cycle the held-writes view of
    the connection's transport, and holding every request head to the service's limits
    (``router/head_limits.py``).

    The parser reports a head in pieces: the target as it arrives, each header once its
    line has ended. Lines, header count and Host are checked there, exactly. What a
    header line still in progress holds is inside httptools, where no callback sees it, so
    the bytes read while a head is unfinished are counted too, and refused over the head
    limit: a head beginning in the middle of a read is counted from the next read on, so
    the count never includes another message's bytes, and what a client can make the
    process hold stays under the limit plus one read.
    """

    _writes: HeldWrites

    def __init__(self, config: Config, server_state: Any, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._policy = head_policy(config)
        self._limits = self._policy.limits
        self._refused: HeadRefused | None = None
        self._refusal_pending = False
        self._idle = True  # between messages
        self._in_head = False  # from a message's first byte to its blank line
        self._begins = 0  # messages begun on this connection
        self._head_bytes = 0
        self._url_bytes = 0
        self._header_lines = 0
        self._header_bytes = 0
        self._host: bytes | None = None
        self._hosts = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._writes = HeldWrites(transport, self.loop)

    def data_received(self, data: bytes) -> None:
        if self._refused is not None:
            return  # refused: what follows is not read
        self._unset_keepalive_if_required()
        begins, idle = self._begins, self._idle
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self._refusal() is not None:
                self._refuse()
                return
            msg = "Invalid HTTP request received."
            self.logger.warning(msg)
            self.send_400_response(msg)
            return
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        if self._in_head:  # a head is unfinished: count what it may hold
            if self._begins == begins:
                self._head_bytes += len(data)
            elif self._begins == begins + 1 and idle:
                self._head_bytes = len(data)  # it began with this read
            else:
                self._head_bytes = 0  # it began inside this read: counted from the next
            limits = self._limits
            if self._head_bytes > limits.head:
                # Mostly a line in progress (what the callbacks have not seen): say so.
                pending = self._head_bytes - self._url_bytes - self._header_bytes
                self._refused = (line_too_long(limits) if pending > limits.header_line
                                 else head_too_large(limits))
                self._refuse()

    def _refusal(self) -> HeadRefused | None:
        """``_refused``, read anew after the parser ran: a callback may have set it, which
        mypy does not see once a check has narrowed it to None, and the compiled code
        (router/native.py) would refuse the value it did not expect."""
        return self._refused

    def _stop(self, refused: HeadRefused) -> None:
        """Refuse the head being parsed: raised inside a parser callback, the error stops
        the parser and :meth:`data_received` answers."""
        self._refused = refused
        raise refused

    def on_message_begin(self) -> None:
        self._begins += 1
        self._idle = False
        self._in_head = True
        self._head_bytes = self._url_bytes = self._header_lines = self._header_bytes = 0
        self._hosts = 0
        self._host = None
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self._url_bytes += len(url)
        if self._url_bytes > self._limits.request_line:
            self._stop(request_line_too_long(self._limits))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        limits = self._limits
        line = len(name) + len(value) + 2
        self._header_lines += 1
        self._header_bytes += line + 2
        if line > limits.header_line:
            self._stop(line_too_long(limits))
        if self._header_lines > limits.headers:
            self._stop(too_many_headers(limits))
        if self._header_bytes + self._url_bytes > limits.head:
            self._stop(head_too_large(limits))
        if len(name) == 4 and name.lower() == b"host":
            self._hosts += 1
            if self._hosts > 1:
                self._stop(host_count_refused(self._hosts))
            self._host = value
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        if self._hosts == 0 and self.parser.get_http_version() == "1.1":
            self._stop(host_count_refused(0))
        previous = self.cycle
        super().on_headers_complete()
        if self.cycle is not previous:  # a new request (not a WebSocket upgrade)
            self.cycle.transport = self._writes  # type: ignore[assignment]

    def on_message_complete(self) -> None:
        self._idle = True
        super().on_message_complete()

    def _refuse(self) -> None:
        """Answer the refused head and close; after the answers in flight, if any."""
        self.transport.pause_reading()  # nothing more is read from this client
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            self._refusal_pending = True  # on_response_complete answers, in order
            return
        refused = self._refused
        assert refused is not None
        self._writes.flush()
        self._unset_keepalive_if_required()
        self.connections.discard(self)
        answer_and_linger(self.transport, self.loop, self._policy.answer(refused, self._host))

    def on_response_complete(self) -> None:
        if self._refusal_pending and not self.pipeline:
            self.server_state.total_requests += 1
            self._refusal_pending = False
            self._refuse()
            return
        super().on_response_complete()

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
