"""The runtime proxy's HTTP/1.1 client to developer origins (the hot path).

Our own because aiohttp's client cost about as much CPU per proxied request as the
whole proxy may spend (bench/proxy_bench.py, docs/decisions.md). It does exactly what
the proxy needs and nothing else: keep-alive pools per origin, each connection opened to
one checked address (``router.origin``), TLS with SNI, separate connect and read
timeouts, request bodies streamed (Content-Length when the client gave one, chunked
otherwise), answers streamed with flow control, no redirects, no decompression, no
cookies. A bodyless idempotent request is retried once, on a new connection, when its
connection closed before any byte of an answer (a pooled connection the origin had just
closed looks exactly like that); nothing else is ever replayed.

Timeouts cost no timer per request: one sweep every ``TICK`` seconds, while anything is
in flight, cancels connects past their deadline, cuts exchanges past their read deadline
and starts watching the downstream client of an exchange that has waited ``SLOW`` seconds
and was given a ``client_gone`` (the ASGI path's), so a client that leaves before the
origin answered frees the origin's connection at once. The fast path gives none: its
protocol cuts the exchange itself. A timeout therefore fires up to ``TICK`` late; an
``asyncio.timeout`` around each connect cost about 8 us of the 80 a new origin connection
takes (a timer armed and cancelled on uvloop, and the context manager's own calls).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterable, Awaitable, Callable

from router.head_limits import HeadLimits
from router.headers import Headers
from router.origin import CheckedResolver, Origin, OriginAddressRefused
from router.origin_connection import OriginConnection
from router.origin_errors import (
    ClientGone,
    OriginClosed,
    OriginConnectTimeout,
    OriginTimeout,
    OriginUnreachable,
    OriginUnresolved,
)

TICK = 0.1
SLOW = 0.25  # seconds without an answer before the client is watched
IDLE_TIMEOUT = 30.0  # a pooled connection unused this long is closed
DNS_TTL = 10.0
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
# A body-carrying method without a body still says so (RFC 9110 8.6).
_LENGTH_ZERO = frozenset({"POST", "PUT", "PATCH"})

ClientGoneWaiter = Callable[[], Awaitable[object]]
PoolKey = tuple[bool, str, int]


def pool_key(origin: Origin) -> PoolKey:
    """The pool an origin's connections go to: scheme, name, port."""
    return (origin.tls, origin.host, origin.port)


class OriginResponse:
    """An origin's answer: status and raw headers now, the body as the caller reads it."""

    __slots__ = ("_client", "_conn", "headers", "status")

    def __init__(self, client: UpstreamClient, conn: OriginConnection) -> None:
        self._client = client
        self._conn = conn
        self.status = conn.status
        self.headers = conn.headers

    @property
    def complete(self) -> bool:
        """The whole answer has arrived (the usual case for a small one)."""
        return self._conn.complete and self._conn.error is None

    def body(self) -> bytes:
        """The whole body, once ``complete``."""
        return self._conn.body()

    def read(self) -> Awaitable[bytes]:
        """The whole body (callers bound its size by the declared length first)."""
        return self._conn.read_all()

    def next_chunk(self) -> Awaitable[bytes]:
        """The body received so far and not yet taken; ``b""`` at the end."""
        return self._conn.next_chunk()

    def watch(self, client_gone: ClientGoneWaiter) -> None:
        """Cut the exchange as soon as ``client_gone()`` returns."""
        self._client.watch(self._conn, client_gone)

    def release(self) -> None:
        """Back to the pool if the answer was read whole, closed otherwise."""
        self._client.release(self._conn)


class UpstreamClient:
    """Pools of keep-alive connections to origins; call inside the running loop."""

    def __init__(self, *, connect_timeout: float, read_timeout: float, max_idle: int,
                 resolver: CheckedResolver, ssl_context: ssl.SSLContext | None = None,
                 head_limits: HeadLimits | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._head_limits = head_limits or HeadLimits()
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._max_idle = max_idle
        self._resolver = resolver
        self._ssl = ssl_context or ssl.create_default_context()
        self._idle: dict[PoolKey, list[OriginConnection]] = {}
        self._idle_count = 0
        self._busy: set[OriginConnection] = set()
        self._dns: dict[str, tuple[float, list[tuple[str, int]]]] = {}
        # Connects in flight: the task waiting for each, and its deadline; those the sweep
        # cancelled for it (their CancelledError becomes OriginConnectTimeout).
        self._connecting: dict[asyncio.Task[object], float] = {}
        self._expired: set[asyncio.Task[object]] = set()
        self._sweeper: asyncio.TimerHandle | None = None
        self._reaper: asyncio.TimerHandle | None = None
        self._closed = False

    def start(self, origin: Origin, method: str, target: bytes, headers: Headers,
              body: bytes = b"", *,
              client_gone: ClientGoneWaiter | None = None) -> OriginConnection | None:
        """Send a request, with its whole ``body`` (framed by the Content-Length in
        ``headers``), on an idle pooled connection, at once; None (nothing sent) when there
        is none. The caller follows the connection's ``on_step`` and hands it to
        :meth:`request` as ``started``, with the same ``body``, for anything but a plain
        answer."""
        conn = self._pooled(pool_key(origin))
        if conn is None:
            return None
        self.begin_on(conn, method, target, headers, body)
        conn.client_gone = client_gone
        return conn

    def begin_on(self, conn: OriginConnection, method: str, target: bytes, headers: Headers,
                 body: bytes = b"") -> None:
        """Send a request as :meth:`start` does, on ``conn``: a pooled connection, or one
        :meth:`opening` has just opened."""
        # Head and body go out in one vectored write: the body is not copied behind the head.
        self._begin(conn, _request_head(method, target, headers, body or None, False), method,
                    body)

    def opening(self, origin: Origin) -> asyncio.Task[OriginConnection]:
        """A new connection to ``origin``, opened in a task of its own exactly as
        :meth:`request` opens one (each address in turn, within the connect timeout; its
        errors are those :meth:`request` raises for it). For a caller that is not a
        coroutine (router/fast_exchange.py); cancelling the task closes what it opened."""
        return self._loop.create_task(self._open(origin, pool_key(origin)))

    async def request(self, origin: Origin, method: str, target: bytes, headers: Headers,
                      body: AsyncIterable[bytes] | bytes | None = None, *,
                      chunked: bool = False,
                      client_gone: ClientGoneWaiter | None = None,
                      started: OriginConnection | None = None) -> OriginResponse:
        """Send a request and wait for the head of the answer.

        ``headers`` are sent as given (``router.headers`` decided them, ``Host``
        included); framing is added here: ``Transfer-Encoding: chunked`` when ``body``
        is given with ``chunked`` (the client declared no length), ``Content-Length: 0``
        for a bodyless POST/PUT/PATCH that carries none. A ``bytes`` body is the whole body
        in hand, sent with the head in one write (``chunked`` must be False: the client's
        Content-Length frames it). ``client_gone`` completes when the downstream client
        leaves; it is awaited only once the request is slow. ``started``: the connection
        :meth:`start` sent this request on; it is the first attempt.
        """
        whole = body if isinstance(body, bytes) else None
        streamed = None if isinstance(body, bytes) else body
        assert whole is None or not chunked
        head = _request_head(method, target, headers, body, chunked)
        if whole:
            head += whole
        # A request with a body is never replayed: the origin may have acted on it.
        retry = body is None and method in IDEMPOTENT
        fresh = False
        key = pool_key(origin)
        while True:
            if started is not None:
                conn, started = started, None
            else:
                conn = (None if fresh else self._pooled(key)) or await self._open(origin, key)
                self._begin(conn, head, method)
            try:
                if streamed is not None:
                    await _send_body(conn, streamed, chunked)
                conn.client_gone = client_gone
                while not conn.head_done and conn.error is None:
                    await conn.waiter()
                if conn.error is not None:
                    raise conn.error
            except OriginClosed as exc:
                self.release(conn)
                if retry and not fresh and not exc.answered:
                    fresh = True
                    continue
                raise
            except BaseException:
                self.release(conn)
                raise
            return OriginResponse(self, conn)

    def _begin(self, conn: OriginConnection, head: bytes, method: str,
               body: bytes = b"") -> None:
        conn.begin(head, method == "HEAD", body)
        self._busy.add(conn)
        self._sweep_soon()

    def release(self, conn: OriginConnection) -> None:
        self._busy.discard(conn)
        if not conn.finish():
            conn.close()
            return
        self._keep_idle(conn)

    def keep(self, conn: OriginConnection) -> None:
        """Pool a connection :meth:`opening` opened for a request that no longer needs it
        (its client left just as it opened): the next request to its origin takes it."""
        if conn.closed:
            return
        self._keep_idle(conn)

    def _keep_idle(self, conn: OriginConnection) -> None:
        if self._closed or self._idle_count >= self._max_idle:
            conn.close()
            return
        conn.idle_since = self._loop.time()
        self._idle.setdefault(conn.key, []).append(conn)
        self._idle_count += 1
        if self._reaper is None:
            self._reaper = self._loop.call_later(IDLE_TIMEOUT / 3, self._reap)

    def watch(self, conn: OriginConnection, client_gone: ClientGoneWaiter) -> None:
        if conn.watcher is None:
            conn.watcher = self._loop.create_task(_cut_when_gone(conn, client_gone))

    async def close(self) -> None:
        self._closed = True
        for handle in (self._sweeper, self._reaper):
            if handle is not None:
                handle.cancel()
        self._sweeper = None
        if self._connecting:  # their deadlines still hold
            self._sweep_soon()
        conns = [*self._busy, *(c for idle in self._idle.values() for c in idle)]
        self._idle.clear()
        self._busy.clear()
        for conn in conns:
            conn.abort(ClientGone("the service is shutting down"))
        if conns:
            await asyncio.sleep(0)  # let the transports report connection_lost

    # -- connections ----------------------------------------------------------------------

    def _pooled(self, key: PoolKey) -> OriginConnection | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            self._idle_count -= 1
            if not conn.closed and conn.transport is not None \
                    and not conn.transport.is_closing():
                return conn
        return None

    async def _open(self, origin: Origin, key: PoolKey) -> OriginConnection:
        task = asyncio.current_task()
        assert task is not None
        self._connecting[task] = self._loop.time() + self._connect_timeout
        self._sweep_soon()
        cancelling = task.cancelling()
        try:
            conn = await self._connect(origin)
        except asyncio.CancelledError:
            # As asyncio.timeout decides: the sweep's cancel becomes the timeout unless the
            # task was also cancelled by someone else (its client left, a shutdown).
            if task in self._expired and task.uncancel() <= cancelling:
                raise OriginConnectTimeout("no connection to the origin in time") from None
            raise
        finally:
            del self._connecting[task]
            self._expired.discard(task)
        conn.key = key
        return conn

    async def _connect(self, origin: Origin) -> OriginConnection:
        addresses = await self._addresses(origin)
        error: OSError | None = None
        for ip, family in addresses:
            try:
                _, conn = await self._loop.create_connection(
                    lambda: OriginConnection(self._loop, self._read_timeout, self._head_limits),
                    host=ip, port=origin.port, family=family,
                    ssl=self._ssl if origin.tls else None,
                    server_hostname=origin.host if origin.tls else None,
                )
            except OSError as exc:  # ssl.SSLError included
                error = exc
                continue
            conn.ip = ip
            return conn
        raise OriginUnreachable(f"could not connect to {origin.host_header}: {error}")

    async def _addresses(self, origin: Origin) -> list[tuple[str, int]]:
        if origin.ip is not None:
            family = socket.AF_INET6 if ":" in origin.ip else socket.AF_INET
            return [(origin.ip, family)]
        now = self._loop.time()
        cached = self._dns.get(origin.host)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            # OriginAddressRefused (an OSError) when no answer is public, outside dev.
            results = await self._resolver.resolve(origin.host, origin.port, socket.AF_UNSPEC)
        except OriginAddressRefused:
            raise
        except OSError as exc:
            raise OriginUnresolved(f"{origin.host} did not resolve: {exc}") from exc
        addresses = [(r["host"], int(r["family"])) for r in results]
        self._dns[origin.host] = (now + DNS_TTL, addresses)
        return addresses

    # -- timers -----------------------------------------------------------------------------

    def _sweep_soon(self) -> None:
        if self._sweeper is None:
            self._sweeper = self._loop.call_at(self._loop.time() + TICK, self._sweep)

    def _sweep(self) -> None:
        now = self._loop.time()
        for task, deadline in list(self._connecting.items()):
            if now >= deadline and task not in self._expired:
                self._expired.add(task)
                task.cancel()
        for conn in list(self._busy):
            if conn.complete or conn.reading_paused or conn.waiting_for_client:
                continue
            if now >= conn.deadline:
                conn.abort(OriginTimeout("the origin did not answer in time"))
            elif (not conn.head_done and conn.client_gone is not None
                  and conn.watcher is None and now - conn.started >= SLOW):
                self.watch(conn, conn.client_gone)
        self._sweeper = (self._loop.call_at(now + TICK, self._sweep)
                         if self._connecting or (self._busy and not self._closed) else None)

    def _reap(self) -> None:
        horizon = self._loop.time() - IDLE_TIMEOUT
        for key, idle in list(self._idle.items()):
            keep = [c for c in idle if not c.closed and c.idle_since > horizon]
            for conn in idle:
                if conn not in keep:
                    conn.close()
            self._idle_count -= len(idle) - len(keep)
            if keep:
                self._idle[key] = keep
            else:
                del self._idle[key]
        self._reaper = (self._loop.call_later(IDLE_TIMEOUT / 3, self._reap)
                        if self._idle and not self._closed else None)


async def _send_body(conn: OriginConnection, body: AsyncIterable[bytes],
                     chunked: bool) -> None:
    chunks = aiter(body)
    while True:
        # The read timeout does not run while the client is the slow side.
        conn.waiting_for_client = True
        try:
            chunk = await anext(chunks, None)
        finally:
            conn.waiting_for_client = False
        if chunk is None:
            break
        if conn.head_done or conn.error is not None:
            conn.reusable = False  # the origin answered (or failed) before the whole body
            return
        conn.write(b"%x\r\n%b\r\n" % (len(chunk), chunk) if chunked else chunk)
        await conn.drain()
    if chunked:
        conn.write(b"0\r\n\r\n")
    else:
        conn.touch()  # the read timeout starts now, however long the client took


async def _cut_when_gone(conn: OriginConnection, client_gone: ClientGoneWaiter) -> None:
    await client_gone()
    conn.abort(ClientGone("the client went away"))


def _request_head(method: str, target: bytes, headers: Headers,
                  body: AsyncIterable[bytes] | bytes | None, chunked: bool) -> bytes:
    if body is not None and chunked:
        headers = [*headers, (b"transfer-encoding", b"chunked")]
    elif body is None and method in _LENGTH_ZERO and not _has_length(headers):
        headers = [*headers, (b"content-length", b"0")]
    return _encode_head(method, target, headers)


def _has_length(headers: Headers) -> bool:
    return any(name == b"content-length" for name, _ in headers)


def _encode_head(method: str, target: bytes, headers: Headers) -> bytes:
    # Joined in C (map over the headers), not by a Python loop: every request pays for it.
    return b"".join((method.encode("ascii"), b" ", target, b" HTTP/1.1\r\n",
                     b"\r\n".join(map(b": ".join, headers)),
                     b"\r\n\r\n" if headers else b"\r\n"))
