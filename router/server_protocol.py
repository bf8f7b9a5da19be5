"""uvicorn's httptools protocol, sending a response head together with what follows it.

uvicorn writes ``http.response.start`` to the socket at once and the body in a second
write; uvloop sends each write immediately, so every response costs two ``write``
syscalls and two TCP segments, and waking the reader twice is the dearest part of a
loopback write (bench/proxy_bench.py, measured with perf). Here a write is held until
the next write of the same connection or the end of the current loop iteration,
whichever comes first: a head and a body sent in one go leave in one ``writev``, and
nothing waits longer than the iteration that produced it.

It also runs the runtime proxy's fast path (``router/fast_path.py``): a request the fast
path accepts gets uvicorn's own request cycle (so keep-alive, pipelining, flow control,
disconnects and shutdown work as for any request) but not the service's ASGI entry. It
is sent at once on an idle pooled connection and a small answer written from the
origin connection's callbacks (``router/fast_exchange.py``), with :func:`write_whole`, in
one go; otherwise, or for anything but a plain answer, the cycle runs
:meth:`router.proxy.HttpProxy.exchange` with the request already planned.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from functools import partial
from typing import Any, cast

import httptools
from starlette.types import Receive
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import (
    HEADER_RE,
    HEADER_VALUE_RE,
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)
from uvicorn.server import ServerState

from router.fast_exchange import FastExchange
from router.fast_path import FastPath
from router.headers import Headers
from router.proxy import request_target


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


# Header names already checked against uvicorn's HEADER_RE: origins send the same few
# names on every answer, and the check was the dearest part of framing one (bench/
# proxy_bench.py). Bounded, so an origin inventing names only costs the check.
MAX_VALID_NAMES = 1024
_VALID_NAMES: set[bytes] = set()


def write_whole(cycle: RequestResponseCycle, writes: HeldWrites, status: int,
                headers: Headers, body: bytes) -> bool:
    """What ``cycle.send`` does with a start message and a final body message, in one write.

    False, with nothing written, whenever ``send`` would do anything else than frame a
    plain answer: wait for the socket to drain, drop the answer of a client that left,
    refuse a header or status, frame chunks, honour a ``Connection`` header, or fail on a
    length mismatch. The caller then sends through ``cycle.send``, which does exactly that.
    """
    if cycle.response_started or cycle.disconnected or cycle.flow.write_paused:
        return False
    line = STATUS_LINE.get(status)
    if line is None:
        return False
    if cycle.default_headers:
        headers = cycle.default_headers + headers
    head_only = cycle.scope["method"] == "HEAD"
    length: bytes | None = None
    parts = [line]
    bad_value = HEADER_VALUE_RE.search
    for name, value in headers:
        if name == b"content-length":
            length = value if length is None else length
        elif name == b"connection" or name == b"transfer-encoding":
            return False
        if name not in _VALID_NAMES:
            if HEADER_RE.search(name):
                return False
            if len(_VALID_NAMES) < MAX_VALID_NAMES:
                _VALID_NAMES.add(name)
        if bad_value(value):
            return False
        parts += (name, b": ", value, b"\r\n")
    if not head_only:
        if length is None:
            # send adds chunked framing unless the status carries no body
            if body or status not in (204, 304):
                return False
        elif not length.isdigit() or int(length) != len(body):
            return False
    keep_alive = cycle.keep_alive
    if not keep_alive:
        parts.append(b"connection: close\r\n")
    parts.append(b"\r\n")
    if body and not head_only:
        parts.append(body)
    cycle.response_started = True
    cycle.waiting_for_100_continue = False
    writes.write_now(b"".join(parts))
    cycle.response_complete = True
    cycle.message_event.set()
    if not keep_alive:
        writes.close()
    cycle.on_response()
    return True


class HttpProtocol(HttpToolsProtocol):
    """Give every request cycle the held-writes view of the connection's transport, and
    serve what the fast path accepts without the service's ASGI entry."""

    _writes: HeldWrites
    _client_ip: str | None = None
    _trusted = False

    def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        fast = getattr(config.app, "fast_path", None)
        # Only where the ASGI path would run the service itself and write no log line:
        # no wrapping middleware (uvicorn's proxy headers, trace logging), no root path,
        # no concurrency limit, no access log.
        usable = (isinstance(fast, FastPath) and self.app is config.app and not self.root_path
                  and self.limit_concurrency is None and not self.access_log)
        self._fast = fast if usable else None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._writes = HeldWrites(transport, self.loop)
        if self._fast is not None:
            self._client_ip = self.client[0] if self.client else None
            self._trusted = self._fast.trusts(self._client_ip)

    def on_headers_complete(self) -> None:
        if self._fast is not None and self._serve_fast(self._fast):
            return
        previous = self.cycle
        super().on_headers_complete()
        if self.cycle is not previous:  # a new request (not a WebSocket upgrade)
            self.cycle.transport = self._writes  # type: ignore[assignment]

    def _serve_fast(self, fast: FastPath) -> bool:
        """uvicorn's ``on_headers_complete`` for a request the fast path accepts; False,
        with nothing changed, for any other (uvicorn's own then runs)."""
        parser = self.parser
        if self.expect_100_continue or parser.should_upgrade():
            return False
        try:
            url = httptools.parse_url(self.url)
        except httptools.HttpParserInvalidURLError:
            return False
        raw_path: bytes = url.path
        if not raw_path.isascii():
            return False
        path = raw_path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        planned = fast.plan(self.headers, path, self._client_ip, self.scheme or "http",
                            self._trusted)
        if planned is None:
            return False
        route, origin, headers = planned
        scope = self.scope
        http_version = parser.get_http_version()
        scope["method"] = parser.get_method().decode("ascii")
        if http_version != "1.1":
            scope["http_version"] = http_version
        query: bytes = url.query or b""
        scope["path"] = path
        scope["raw_path"] = raw_path
        scope["query_string"] = query
        cycle = RequestResponseCycle(
            scope=scope, transport=cast(asyncio.Transport, self._writes), flow=self.flow,
            logger=self.logger, access_logger=self.access_logger, access_log=False,
            default_headers=self.server_state.default_headers,
            message_event=asyncio.Event(), expect_100_continue=False,
            keep_alive=http_version != "1.0" and parser.should_keep_alive(),
            on_response=self.on_response_complete,
        )
        exchange = FastExchange(
            fast.proxy, route, origin, scope["method"], request_target(raw_path, query),
            headers, cast(Receive, cycle.receive), partial(write_whole, cycle, self._writes),
            partial(self._start_asgi_task, cycle))
        existing, self.cycle = self.cycle, cycle
        if existing is None or existing.response_complete:
            if exchange.start():
                fast.untasked += 1
            else:
                self._start_asgi_task(cycle, exchange.task())
        else:  # pipelined behind an answer still in progress: queued, as uvicorn does
            self.flow.pause_reading()
            self.pipeline.appendleft((cycle, exchange.task()))
        return True

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
