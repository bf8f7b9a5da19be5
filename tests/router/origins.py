"""Origins for the proxy tests: aiohttp apps and hand-written misbehaving servers.

Every origin is a real server on loopback in its own thread and event loop, so the
router under test talks real HTTP to it. ``RawOrigin`` exists for what aiohttp.web
will not do: odd response headers, hanging, closing without an answer. ``FullQueue`` is
an origin a connect to stays pending on.
"""

from __future__ import annotations

import asyncio
import select
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import httpx
from aiohttp import web
from sqlalchemy.orm import Session, sessionmaker

from tests.factories import add_app
from tests.support.router import RouterFactory, RunningRouter
from tests.support.servers import AiohttpServer, close_server
from tests.support.services import free_port

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
RawHandler = Callable[["RawOrigin", asyncio.StreamReader, asyncio.StreamWriter],
                      Awaitable[None]]


@contextmanager
def aiohttp_origin(*routes: tuple[str, str, Handler]) -> Iterator[AiohttpServer]:
    """An aiohttp.web origin serving ``(method, path, handler)`` routes."""
    app = web.Application()
    for method, path, handler in routes:
        app.router.add_route(method, path, handler)
    with AiohttpServer(app) as server:
        yield server


class RawOrigin:
    """A hand-written HTTP/1.1 server: ``handle(origin, reader, writer)`` per connection."""

    def __init__(self, handle: RawHandler) -> None:
        self._handle = handle
        self.port = free_port()
        self.connections = 0
        self.heads: list[bytes] = []
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def read_head(self, reader: asyncio.StreamReader) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        self.heads.append(head)
        return head

    async def _connected(self, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._handle(self, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()
            with suppress(ConnectionError):
                await writer.wait_closed()

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._connected, "127.0.0.1", self.port)

    async def _stop(self) -> None:
        assert self._server is not None
        await close_server(self._server)
        # Each connection made takes a turn or two more (its connection_made, then its task
        # running _connected) to be in _tasks: let them get there, or its transport would
        # never be closed.
        current = asyncio.current_task()
        for _ in range(100):
            if all(task is current or task in self._tasks for task in asyncio.all_tasks()):
                break
            await asyncio.sleep(0)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def __enter__(self) -> RawOrigin:
        self._thread.start()
        self._call(self._start())
        return self

    def __exit__(self, *exc: object) -> None:
        self._call(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


@contextmanager
def proxied(start: RouterFactory, sessions: sessionmaker[Session], origin: str,
            slug: str = "game", **overrides: Any) -> Iterator[RunningRouter]:
    """A router serving ``slug`` from ``origin``."""
    add_app(sessions, slug, origin)
    with start(**overrides) as router:
        yield router


def plain_client(router: RunningRouter, slug: str = "game", **kwargs: Any) -> httpx.Client:
    """A client that sends no Accept-Encoding (httpx adds one by default)."""
    client = router.client(slug, **kwargs)
    del client.headers["accept-encoding"]
    return client


def closed_port() -> int:
    """A loopback port nothing listens on (bound once, then released)."""
    return free_port()


class FullQueue:
    """A loopback listener that completes no new connection until :meth:`empty`.

    Its accept queue is full (backlog 0 and one connection never accepted): Linux drops
    the SYN and the connecting side retries it a second later.
    """

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(0)
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.filler = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        probe = socket.socket()
        probe.setblocking(False)
        probe.connect_ex(("127.0.0.1", self.port))
        _, writable, _ = select.select([], [probe], [], 0.3)
        assert not writable, "the queue is not full: a connect completed at once"
        probe.close()

    def empty(self) -> None:
        """Take what waits in the queue: room for the next connection."""
        self.listener.setblocking(False)
        while True:
            try:
                self.listener.accept()[0].close()
            except BlockingIOError:
                return

    def accepts_within(self, seconds: float) -> int:
        """Connections completed within ``seconds`` (accepted and closed)."""
        count, deadline = 0, time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([self.listener], [], [], left)
            if readable:
                self.listener.accept()[0].close()
                count += 1
        return count

    def accept(self, seconds: float) -> socket.socket:
        """The next connection completed within ``seconds``."""
        readable, _, _ = select.select([self.listener], [], [], seconds)
        assert readable, "no connection arrived"
        conn = self.listener.accept()[0]
        conn.setblocking(True)
        conn.settimeout(5)
        return conn

    def close(self) -> None:
        self.filler.close()
        self.listener.close()


@contextmanager
def full_queue() -> Iterator[FullQueue]:
    queue = FullQueue()
    try:
        yield queue
    finally:
        queue.close()
