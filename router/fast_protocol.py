"""The HTTP/1.1 protocol every connection starts with: the runtime fast path, without uvicorn.

uvicorn's httptools protocol builds an ASGI scope, a request cycle, an ``asyncio.Event``
and a keep-alive timer for every request, whether or not ASGI runs; measured on this
box, that framework work cost more than the whole proxying (bench/proxy_bench.py,
docs/decisions.md). This protocol parses a request head itself, waits for the body its
Content-Length declares when that is at most ``MAX_BODY``, and, when
:meth:`router.fast_path.FastPath.plan` accepts the request (a cached, open runtime; no
upgrade), sends head and body on a pooled origin connection and writes the small answer
in one write from the origin connection's callback (``router/fast_exchange.py``).
Nothing per request but the request's bytes, the planned headers and the exchange; and
nothing reaches an origin before the request is whole.

Any other request whose head is whole and which has no body (another host, a cache
miss, a closed gate, ``/svc-auth-return``) runs the service's ASGI application in a
uvicorn request cycle on this connection, exactly as uvicorn's own protocol would run it,
and the connection stays here. Everything else is uvicorn's, by handing the connection
over: the first request with a chunked body, a body over ``MAX_BODY`` or one the fast
path does not proxy, an upgrade, ``Expect``, or a head that does not parse is given, from
its first byte, to :class:`router.server_protocol.HttpProtocol`, which then owns the
connection for the rest of its life. A request is decided before any byte of it is
consumed: its head is framed here by its blank line, its body counted by its
Content-Length, and only a request that is whole at that point is ever served here.
Every head is held to the service's limits first, as it arrives
(``router/head_limits.py``): one over them is answered 414 or 431 here and the
connection closed, whatever would have served it.

Reading a request is metered per app (``router/turns.py``): past its app's share of the
event loop's turn, a connection's bytes wait for a later turn, so that one app's burst
does not hold up the requests of another. A fast request is sent on an idle pooled origin
connection, or on one the exchange opens for it. One whose answer the exchange cannot
write in one go (an error, a streamed or large answer, a full write buffer, a client that
left) continues the same way, as a request cycle running
:meth:`router.proxy.HttpProxy.exchange` as its ASGI application: gateway pages, retries,
streaming and flow control stay those of the ASGI path.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from typing import Any, cast

import httptools
from uvicorn._types import ASGI3Application
from uvicorn.config import Config
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle
from uvicorn.protocols.utils import is_ssl
from uvicorn.server import ServerState

from router.fast_exchange import FastExchange
from router.fast_path import FastPath
from router.head_limits import HeadRefused, HeadScan, check_whole, host_count_refused, host_in
from router.headers import Headers
from router.lingering import answer_and_linger
from router.proxy import request_target
from router.request_head import RequestHead
from router.server_protocol import HeldWrites, HttpProtocol, frame_whole, head_policy
from router.transport_address import local_address, peer_address
from router.turns import Turns

log = logging.getLogger(__name__)

# Pipelined bytes held while a request is in flight before reading pauses.
MAX_BUFFER = 64 * 1024
# The largest request body held here, whole, and proxied on the fast path; a larger one
# (or a chunked one) hands the connection to uvicorn's protocol, which streams it. As
# MAX_BUFFER: what a connection can make the process hold stays of that order.
MAX_BODY = 64 * 1024
# The share of a turn (router/turns.py) of connections whose last request the service
# answered itself (its own hosts, a cache miss): no app slug has a space.
SERVICE_TURNS = " service"


class FastProtocol(asyncio.Protocol):
    __slots__ = (
        "_app", "_app_state", "_buffer", "_client", "_client_ip", "_closing", "_config", "_cycle",
        "_exchange", "_fast", "_flow", "_gone", "_handed_over", "_head", "_head_end",
        "_idle_timer", "_last", "_loop", "_policy", "_queued", "_reading_paused", "_request",
        "_scan", "_scheme", "_server", "_server_state", "_transport", "_trusted", "_turn_key",
        "_turns", "_wanted", "_writes",
    )

    def __init__(self, fast: FastPath, config: Config, server_state: ServerState,
                 app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._fast = fast
        self._config = config
        self._app = cast(ASGI3Application, config.loaded_app)
        self._server_state = server_state
        self._app_state = app_state
        self._loop = _loop or asyncio.get_event_loop()
        self._head = RequestHead()
        self._policy = head_policy(config)
        self._scan = HeadScan(self._policy.limits)
        self._buffer = b""
        self._transport: asyncio.Transport | None = None
        self._flow: FlowControl | None = None
        self._writes: HeldWrites | None = None
        self._server: tuple[str, int | None] | None = None
        self._client: tuple[str, int] | None = None
        self._client_ip: str | None = None
        self._scheme = "http"
        self._trusted = False
        # The request in flight: (method, http_version, path, raw_path, query, headers,
        # keep_alive); None while idle.
        self._request: tuple[str, str, str, bytes, bytes, Headers, bool] | None = None
        self._exchange: FastExchange | None = None
        self._cycle: RequestResponseCycle | None = None
        # While a parsed head's body arrives: where the head ends, and where the whole
        # request will end, in the buffer (0: no body awaited).
        self._head_end = 0
        self._wanted = 0
        self._reading_paused = False
        self._closing = False  # shutting down: close after the answer in flight
        self._gone = False
        self._handed_over = False
        self._last = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None
        turns = fast.turns
        if turns is None:
            turns = fast.turns = Turns(self._loop)
        self._turns = turns
        # Whose share of a turn this connection's next request takes: the app its last
        # request went to ("": none yet, as every new connection).
        self._turn_key = ""
        self._queued = False  # waiting for its turn to read what the buffer holds

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        stream = cast(asyncio.Transport, transport)
        self._transport = stream
        self._flow = FlowControl(stream)
        self._writes = HeldWrites(stream, self._loop)
        self._server = local_address(stream)
        self._client = peer_address(stream)
        self._client_ip = self._client[0] if self._client else None
        self._scheme = "https" if is_ssl(stream) else "http"
        self._trusted = self._fast.trusts(self._client_ip)
        self._server_state.connections.add(self)  # type: ignore[arg-type]
        self._last = self._loop.time()
        self._arm_idle_timer()

    def data_received(self, data: bytes) -> None:
        self._buffer = self._buffer + data if self._buffer else data
        if self._request is not None:  # pipelined behind the answer in flight
            if len(self._buffer) > MAX_BUFFER and not self._reading_paused:
                self._pause_reading()
            return
        self._last = self._loop.time()
        if self._queued:
            if len(self._buffer) > MAX_BUFFER and not self._reading_paused:
                self._pause_reading()
            return
        if not self._turns.admit(self._turn_key):
            self._queued = True
            self._turns.defer(self._turn_key, self._turn_came)
            return
        self._next()

    def _turn_came(self) -> None:
        """What arrived while the connection's app had spent its share of a turn."""
        self._queued = False
        transport = self._transport
        if (self._gone or self._handed_over or self._request is not None or transport is None
                or transport.is_closing()):
            return  # (a request in flight: the buffer is served when it is answered)
        if self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()
        try:
            self._next()
        except Exception:  # as uvloop treats a data_received that raised
            log.exception("fast path request failed")
            transport.abort()

    def eof_received(self) -> bool | None:
        return None  # close; connection_lost settles the request in flight

    def connection_lost(self, exc: Exception | None) -> None:
        self._server_state.connections.discard(self)
        self._gone = True
        exchange = self._exchange
        if exchange is not None:
            self._exchange = None  # it holds this protocol's methods: no cycle left behind
            exchange.client_left()
        self._head.spend()
        cycle = self._cycle
        if cycle is not None:
            if not cycle.response_complete:
                cycle.disconnected = True
            cycle.message_event.set()
        if self._flow is not None:
            self._flow.resume_writing()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def pause_writing(self) -> None:
        assert self._flow is not None
        self._flow.pause_writing()

    def resume_writing(self) -> None:
        assert self._flow is not None
        self._flow.resume_writing()

    def shutdown(self) -> None:
        """uvicorn's graceful shutdown: close now if idle, else after the answer."""
        transport = self._transport
        if transport is None:
            return
        if self._request is None and not self._wanted:
            transport.close()
            return
        self._closing = True  # a body on its way: its request is answered, then closed
        if self._cycle is not None:
            self._cycle.keep_alive = False

    # -- requests -------------------------------------------------------------------------

    def _next(self) -> None:
        """Serve the request at the start of the buffer once it is whole: its head, and the
        body its Content-Length declares (up to ``MAX_BODY``)."""
        if self._wanted:  # the head is parsed; its body is arriving
            if len(self._buffer) >= self._wanted:
                self._body_arrived()
            return
        end = self._read_head()
        if end < 0:
            return
        head = self._head
        if head.complete:
            self._serve(end, None)
            return
        length = head.length
        # A chunked body, or one over the bound, streams through uvicorn's protocol: what a
        # connection makes this process hold stays a head and MAX_BODY.
        if head.chunked or length is None or not length.isdigit() or int(length) > MAX_BODY:
            self._hand_over()
            return
        self._head_end = end
        self._wanted = end + int(length)
        if len(self._buffer) >= self._wanted:
            self._body_arrived()

    def _read_head(self) -> int:
        """Parse the head at the start of the buffer; where it ends, or -1 when it is not
        all there yet or was refused or handed over."""
        buffer = self._buffer
        scan = self._scan
        end = buffer.find(b"\r\n\r\n", scan.resume_at) if scan.started else buffer.find(
            b"\r\n\r\n")
        try:
            if end < 0:
                scan.check(buffer)  # refuses a head growing past the limits
                return -1
            check_whole(buffer, end + 4, scan)
        except HeadRefused as refused:
            if refused.malformed:
                self._hand_over()  # uvicorn answers 400, as for every head that does not parse
            else:
                self._refuse(refused, host_in(buffer[:self._policy.limits.head]))
            return -1
        head = self._head
        try:
            head.parser.feed_data(buffer[:end + 4])
        except (httptools.HttpParserError, httptools.HttpParserUpgrade):
            self._hand_over()  # uvicorn answers 400, or upgrades
            return -1
        if head.hosts > 1 or (head.hosts == 0 and head.version == "1.1"):
            self._refuse(host_count_refused(head.hosts), host_in(buffer[:end + 4]))
            return -1
        if head.expect or head.upgrade:
            self._hand_over()  # something only uvicorn does
            return -1
        return end + 4

    def _body_arrived(self) -> None:
        """The body of the parsed head is all in the buffer: serve the request."""
        start, end = self._head_end, self._wanted
        self._wanted = 0
        body = self._buffer[start:end]
        head = self._head
        try:
            head.parser.feed_data(body)  # the parser must stand at the next request
        except (httptools.HttpParserError, httptools.HttpParserUpgrade):
            head.complete = False
        if not head.complete:  # not for a Content-Length body; uvicorn's parser would say
            self._hand_over()
            return
        self._serve(end, body)

    def _serve(self, end: int, body: bytes | None) -> None:
        """Proxy, or answer through ASGI, the parsed request whose bytes end at ``end``."""
        head = self._head
        try:
            # Any, not httptools' URL: its stubs say bytes where it gives None (a target
            # without a query), which compiled code would refuse (scripts/build_native.py).
            url: Any = httptools.parse_url(head.url)
        except httptools.HttpParserInvalidURLError:
            self._hand_over()
            return
        raw_path: bytes = url.path
        if not raw_path.isascii():
            self._hand_over()
            return
        path = raw_path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        try:
            planned = self._fast.plan(head.headers, path, self._client_ip, self._scheme,
                                      self._trusted, len(body) if body is not None else 0)
        except Exception:  # a bug here must not cost the connection: ASGI answers instead
            log.exception("fast path plan failed")
            planned = None
        if planned is None and body is not None:
            # A body is proxied here, to a runtime, or not at all: every other request
            # with one is uvicorn's, from its first byte (nothing of it is consumed yet).
            self._hand_over()
            return
        self._buffer = self._buffer[end:]
        method = head.method.decode("ascii")
        query: bytes = url.query or b""
        self._request = (method, head.version, path, raw_path, query, head.headers,
                         head.keep_alive)
        if planned is None:
            # Another host, a cache miss, a closed gate: the service answers, through ASGI,
            # and the connection stays here for the requests after it.
            self._turn_key = SERVICE_TURNS
            self._fall_back(self._app)
            return
        route, origin, headers = planned
        self._turn_key = route.slug
        exchange = self._exchange = FastExchange(
            self._fast.proxy, route, origin, method, request_target(raw_path, query), headers,
            body, self._write_whole, self._fall_back, self._turns)
        try:
            pooled = exchange.start()
        except Exception:  # as for the plan: the request goes the ordinary way instead
            log.exception("fast exchange start failed")
            self._fall_back(exchange.task())
            return
        if pooled:
            self._fast.untasked += 1
        else:
            self._fast.opened += 1

    def _refuse(self, refused: HeadRefused, host: bytes | None) -> None:
        """Answer a head over the limits (or naming no single host) and close: nothing of
        it reaches an origin or the service."""
        transport = self._transport
        assert self._writes is not None and transport is not None
        self._buffer = b""
        self._handed_over = True  # the connection is no longer this protocol's
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        self._server_state.connections.discard(self)
        self._writes.flush()
        answer_and_linger(transport, self._loop, self._policy.answer(refused, host))

    def _write_whole(self, status: int, headers: Headers, body: bytes) -> bool:
        """The answer in one write; False (nothing written) when a request cycle must
        send it (see :func:`router.server_protocol.frame_whole`)."""
        request = self._request
        flow = self._flow
        if (request is None or self._cycle is not None or self._gone or flow is None
                or flow.write_paused):
            return False
        keep_alive = request[6] and not self._closing
        data = frame_whole(status, headers, body, self._server_state.default_headers,
                           head_only=request[0] == "HEAD", keep_alive=keep_alive)
        if data is None:
            return False
        assert self._writes is not None
        self._writes.write_now(data)
        self._done(keep_alive)
        return True

    def _fall_back(self, app: ASGI3Application) -> None:
        """The rest of the request in flight as a uvicorn request cycle running ``app``."""
        request = self._request
        assert request is not None and self._flow is not None and self._writes is not None
        method, version, path, raw_path, query, headers, keep_alive = request
        scope = {
            "type": "http", "asgi": {"version": self._config.asgi_version,
                                     "spec_version": "2.3"},
            "http_version": version, "server": self._server, "client": self._client,
            "scheme": self._scheme, "root_path": "", "headers": headers,
            "state": self._app_state.copy(), "method": method, "path": path,
            "raw_path": raw_path, "query_string": query,
        }
        cycle = self._cycle = RequestResponseCycle(
            scope=scope,  # type: ignore[arg-type]
            transport=cast(asyncio.Transport, self._writes), flow=self._flow,
            logger=logging.getLogger("uvicorn.error"),
            access_logger=logging.getLogger("uvicorn.access"), access_log=False,
            default_headers=self._server_state.default_headers,
            message_event=asyncio.Event(), expect_100_continue=False,
            keep_alive=keep_alive and not self._closing, on_response=self._cycle_done)
        cycle.more_body = False  # the request had no body: receive() gives it at once
        cycle.message_event.set()
        if self._gone:
            cycle.disconnected = True
        task = self._loop.create_task(cycle.run_asgi(app))
        task.add_done_callback(self._server_state.tasks.discard)
        self._server_state.tasks.add(task)

    def _cycle_done(self) -> None:
        cycle = self._cycle
        assert cycle is not None
        self._cycle = None
        self._done(cycle.keep_alive)

    def _done(self, keep_alive: bool) -> None:
        """The answer is written (uvicorn's ``on_response_complete``)."""
        self._server_state.total_requests += 1
        self._request = None
        self._exchange = None
        transport = self._transport
        assert transport is not None
        if not keep_alive:
            assert self._writes is not None
            self._writes.close()
            return
        if transport.is_closing():
            return
        if self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()
        self._last = self._loop.time()
        if self._buffer:
            # Not from inside this callback: the origin connection of the answer just
            # written goes back to its pool first, for the next request to use.
            self._loop.call_soon(self._resume)
        elif self._idle_timer is None:
            self._arm_idle_timer()

    def _resume(self) -> None:
        if self._request is None and not self._handed_over and not self._gone and self._buffer:
            self._next()

    # -- handing over to uvicorn --------------------------------------------------------

    def _hand_over(self) -> None:
        """Give the connection, and every byte not yet served, to uvicorn's protocol."""
        transport = self._transport
        assert transport is not None and self._writes is not None
        self._writes.flush()  # what a request cycle here wrote goes first
        self._handed_over = True
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        self._server_state.connections.discard(self)
        protocol = HttpProtocol(self._config, self._server_state, self._app_state, self._loop)
        if self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        if self._flow is not None and self._flow.write_paused:
            protocol.pause_writing()
        data, self._buffer = self._buffer, b""
        protocol.data_received(data)

    # -- idle connections ---------------------------------------------------------------

    def _arm_idle_timer(self) -> None:
        self._idle_timer = self._loop.call_at(self._last + self._config.timeout_keep_alive,
                                              self._idle_check)

    def _idle_check(self) -> None:
        """uvicorn's keep-alive timeout, without a timer per request: the timer checks
        when the connection last did something, and re-arms for that."""
        self._idle_timer = None
        transport = self._transport
        if transport is None or transport.is_closing() or self._handed_over:
            return
        if self._request is not None:
            return  # busy: re-armed when the answer is written
        if self._loop.time() >= self._last + self._config.timeout_keep_alive:
            transport.close()
        else:
            self._arm_idle_timer()

    def _pause_reading(self) -> None:
        assert self._transport is not None
        self._reading_paused = True
        self._transport.pause_reading()


def http_protocol(config: Config, server_state: ServerState, app_state: dict[str, Any],
                  _loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Protocol:
    """uvicorn's ``http`` protocol factory: :class:`FastProtocol` where the service's fast
    path is on and the ASGI path would run the service itself and write no log line (no
    wrapping middleware, no root path, no concurrency limit, no access log); uvicorn's
    own protocol (with held writes) otherwise. Read for each new connection."""
    if not config.loaded:
        config.load()
    # The loaded app, not ``config.app``: under `SVCSRV_PROCESSES` that is an import string.
    # Middleware uvicorn wraps around it (proxy headers, trace logging) has no ``fast_path``.
    fast = getattr(config.loaded_app, "fast_path", None)
    access_log = config.access_log and logging.getLogger("uvicorn.access").hasHandlers()
    if (isinstance(fast, FastPath) and not config.root_path
            and config.limit_concurrency is None and not access_log):
        return FastProtocol(fast, config, server_state, app_state, _loop)
    return HttpProtocol(config, server_state, app_state, _loop)
