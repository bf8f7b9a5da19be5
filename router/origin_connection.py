"""One keep-alive HTTP/1.1 connection to an origin: an asyncio Protocol around httptools.

It carries one exchange at a time (no pipelining). The request head and body are written
by the caller (:mod:`router.upstream_client`); this module parses the answer and hands
it over: the head once complete, the body chunk by chunk with flow control (reading
pauses while more than ``HIGH_WATER`` bytes wait for the caller). Errors are stored, not
raised into futures: a waiter is woken and finds ``error`` set.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import cast

import httptools

from router.head_limits import HeadLimits
from router.origin_errors import (
    OriginClosed,
    OriginError,
    OriginProtocolError,
)

# Pause reading the origin while this much body waits for a slow client.
HIGH_WATER = 256 * 1024
_NO_BODY_STATUS = (204, 304)
# A lost connection's parser (see connection_lost); it is never fed.
_SPENT = httptools.HttpResponseParser(object())


class OriginConnection(asyncio.Protocol):
    def __init__(self, loop: asyncio.AbstractEventLoop, read_timeout: float,
                 limits: HeadLimits | None = None) -> None:
        self.loop = loop
        self.read_timeout = read_timeout
        # An answer's head is held to the limits a request's head is (router/head_limits.py):
        # an origin sending an endless header must not grow the router's memory.
        self.limits = limits or HeadLimits()
        self.transport: asyncio.Transport | None = None
        self.ip = ""  # the checked address this connection was opened to
        self.key: tuple[bool, str, int] = (False, "", 0)  # its pool: (tls, host, port)
        self.closed = False
        self.idle_since = 0.0
        self.exchanges = 0  # begun on this connection: 0 while fresh
        self._parser = httptools.HttpResponseParser(self)
        self._fresh_parser = False  # a HEAD answer left the parser expecting a body
        self._writing_paused = False
        self._reading_paused = False
        self._drain: asyncio.Future[None] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._reset()

    def _reset(self) -> None:
        self.busy = False
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._buffered = 0
        self.head_done = False
        self.complete = False
        self.keep_alive = False
        self.answered = False
        self.reusable = True  # cleared when the request body was not sent whole
        self.waiting_for_client = False  # for the next chunk of the request body
        self.error: OriginError | None = None
        self._head_read = 0  # bytes read while the answer's head was unfinished
        self._check_lines = False  # the head so far is long enough to break a line limit
        self._head_error: OriginProtocolError | None = None
        self._head_only = False
        self._informational = False
        self.started = 0.0
        self.deadline = 0.0
        self.client_gone: Callable[[], Awaitable[object]] | None = None
        self.watcher: asyncio.Task[None] | None = None
        # Called at each step of the exchange instead of a waiter, by a caller that is not
        # a coroutine (router/fast_exchange.py); once per data_received, after the parser.
        self.on_step: Callable[[], None] | None = None

    # -- the caller's side --------------------------------------------------------------

    def begin(self, head: bytes, head_only: bool, body: bytes = b"") -> None:
        """Start an exchange: ``head`` is the whole request head, already encoded, and
        ``body`` the whole body it frames, if any."""
        assert self.transport is not None and not self.busy
        if self._fresh_parser:
            self._parser = httptools.HttpResponseParser(self)
            self._fresh_parser = False
        self.busy = True
        self.exchanges += 1
        self._head_only = head_only
        self.started = now = self.loop.time()
        self.deadline = now + self.read_timeout
        if body:
            self.transport.writelines((head, body))
        else:
            self.transport.write(head)

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.touch()
        self.transport.write(data)

    def touch(self) -> None:
        """Progress: the read timeout counts from now."""
        self.deadline = self.loop.time() + self.read_timeout

    async def drain(self) -> None:
        if self._writing_paused and self.error is None:
            self._drain = self.loop.create_future()
            try:
                await self._drain
            finally:
                self._drain = None
        if self.error is not None:
            raise self.error


    async def next_chunk(self) -> bytes:
        """The body received so far and not yet taken; ``b""`` once it is complete."""
        while not self._body:
            if self.error is not None:
                raise self.error
            if self.complete:
                return b""
            await self.waiter()
        body = self._body
        data = body[0] if len(body) == 1 else b"".join(body)
        body.clear()
        self._buffered = 0
        if self._reading_paused and self.transport is not None:
            self._reading_paused = False
            self.deadline = self.loop.time() + self.read_timeout
            self.transport.resume_reading()
        return data

    def body(self) -> bytes:
        """The whole body, once ``complete`` (and no ``error``)."""
        body = self._body
        return body[0] if len(body) == 1 else b"".join(body)

    async def read_all(self) -> bytes:
        parts = []
        while chunk := await self.next_chunk():
            parts.append(chunk)
        return b"".join(parts)

    @property
    def reading_paused(self) -> bool:
        return self._reading_paused

    def abort(self, error: OriginError) -> None:
        """Cut the exchange and the connection; waiters wake and find ``error``."""
        if not self.complete and self.error is None:
            self.error = error
        self.reusable = False
        self.closed = True
        if self.transport is not None:
            self.transport.abort()
        self._wake()

    def finish(self) -> bool:
        """End the exchange; whether the connection can carry another one."""
        watcher = self.watcher
        if watcher is not None and not watcher.done():
            watcher.cancel()
        reusable = (self.complete and self.keep_alive and self.reusable and not self.closed
                    and not self._reading_paused)
        self._reset()
        return reusable

    def close(self) -> None:
        self.closed = True  # at once: connection_lost comes an iteration later
        if self.transport is not None:
            self.transport.close()

    def waiter(self) -> asyncio.Future[None]:
        """Completes at the next step of the exchange (or its end); check the state then."""
        waiter = self._waiter = self.loop.create_future()
        return waiter

    def _wake(self) -> None:
        # The parser callbacks call this only when a waiter or on_step is set: inside
        # data_received (the usual case) neither is, and the call would do nothing.
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():  # cancelled with its task
                waiter.set_result(None)
        step = self.on_step
        if step is not None:
            step()

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's are not registered as asyncio.Transport subclasses).
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self.busy or self.complete:
            # Nothing was asked (or the answer is over): no byte may arrive now.
            self.reusable = False
            self.close()
            return
        self.answered = True
        self.deadline = self.loop.time() + self.read_timeout
        if not self.head_done:
            # What an unfinished header line holds is inside httptools: count it. While the
            # head read so far is shorter than the line limit, no line of it can be over
            # it, and on_header skips the per-line checks (the usual answer).
            self._head_read += len(data)
            self._check_lines = self._head_read > self.limits.header_line
        # Held back while the parser runs: the step may end the exchange and pool the
        # connection, which must not happen inside a parser callback.
        step, self.on_step = self.on_step, None
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            self.abort(self._head_error or OriginProtocolError(str(exc) or type(exc).__name__))
        else:
            if not self.head_done and self.error is None and self._head_read > self.limits.head:
                self.abort(OriginProtocolError(
                    f"the answer's head is over {self.limits.head} bytes"))
        if step is not None:
            self.on_step = step
            step()

    def eof_received(self) -> bool | None:
        self.closed = True
        return None  # close the transport: connection_lost settles the exchange

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.busy and not self.complete and self.error is None:
            if self.head_done and self._until_close():
                self.complete = True  # the answer was framed by the end of the connection
            else:
                self.error = OriginClosed(self.answered)
        self._wake()
        drain = self._drain
        if drain is not None and not drain.done():
            drain.set_result(None)
        # The parser holds this object's methods: dropped, both go with their last
        # reference rather than at the collector's next pass.
        self._parser = _SPENT

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        drain = self._drain
        if drain is not None and not drain.done():
            drain.set_result(None)

    # -- httptools callbacks --------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._check_lines:
            limits = self.limits
            if len(name) + len(value) + 2 > limits.header_line:
                self._refuse_head(f"a header line of the answer is over {limits.header_line} "
                                  "bytes")
            self._check_count(1)
        if not self.complete:
            self.headers.append((name, value))

    def _check_count(self, more: int) -> None:
        if len(self.headers) + more > self.limits.headers:
            self._refuse_head(f"the answer has over {self.limits.headers} header lines")

    def _refuse_head(self, why: str) -> None:
        self._head_error = OriginProtocolError(why)
        raise self._head_error  # stops the parser; data_received aborts with it

    def on_headers_complete(self) -> None:
        if self.complete:
            return
        self._check_count(0)  # a short head can still hold many short lines
        status = self._parser.get_status_code()
        if status < 200:
            if status == 101:
                raise OriginProtocolError("101 Switching Protocols to a request without Upgrade")
            self.headers = []  # 100 Continue, 103 Early Hints: not relayed
            self._informational = True
            return
        self.status = status
        self.head_done = True
        if self._head_only:
            # httptools cannot be told the request was HEAD: the answer ends here, and
            # the next exchange gets a new parser (this one would expect the body).
            self.complete = True
            self.keep_alive = self._parser.should_keep_alive()
            self._fresh_parser = True
        if self._waiter is not None or self.on_step is not None:
            self._wake()

    def on_body(self, body: bytes) -> None:
        if self.complete:
            self.reusable = False
            return
        self._body.append(body)
        self._buffered += len(body)
        if self._buffered > HIGH_WATER and not self._reading_paused and self.transport:
            self._reading_paused = True
            self.transport.pause_reading()
        if self._waiter is not None or self.on_step is not None:
            self._wake()

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
            return
        if self.complete:
            return
        self.complete = True
        self.keep_alive = self._parser.should_keep_alive()
        if self._waiter is not None or self.on_step is not None:
            self._wake()

    def _until_close(self) -> bool:
        """Whether the answer had no length and no chunking: the close ends it."""
        if self.status in _NO_BODY_STATUS:
            return False
        for name, value in self.headers:
            lowered = name.lower()
            if lowered == b"content-length":
                return False
            if lowered == b"transfer-encoding" and b"chunked" in value.lower():
                return False
        return True
