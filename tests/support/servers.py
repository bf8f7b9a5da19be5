"""Real HTTP servers on loopback, each in its own thread and event loop."""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from aiohttp import web

from router.cli import server_config
from router.settings import Settings
from tests.support.services import free_port


@contextmanager
def serve_router(app: Any, settings: Settings, **extra: Any) -> Iterator[str]:
    """Run ``create_app(settings)`` under uvicorn exactly as ``svc-server`` does; ``extra``
    goes to uvicorn (``ssl_certfile``/``ssl_keyfile``: TLS, the yielded URL still says
    http)."""
    config = server_config(app, settings, log_level="warning", **extra)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("router did not start")
        time.sleep(0.01)
    try:
        yield f"http://{settings.bind_host}:{settings.bind_port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def hold_loop(loop: asyncio.AbstractEventLoop, seconds: float) -> None:
    """Keep ``loop`` (running in another thread) busy for ``seconds``, a callback sleeping
    in it; returns once it sleeps. What reaches its sockets meanwhile, it finds in one
    turn when it wakes."""
    asleep = threading.Event()

    def hold() -> None:
        asleep.set()
        time.sleep(seconds)

    loop.call_soon_threadsafe(hold)
    assert asleep.wait(5), "the loop never ran the hold"


async def close_server(server: asyncio.Server) -> None:
    """Close ``server`` leaving no connection half made.

    A connection accepted in one loop turn becomes a transport in the next. On a server
    closed in between, making the transport fails (Python 3.11's ``Server._attach``
    asserts the server is open) and nothing closes the accepted socket: a ResourceWarning
    in whichever later test the collector happens to run. So: stop accepting, let the
    accepted become transports of the still open server, then close it."""
    loop = asyncio.get_running_loop()
    for sock in server.sockets:
        loop.remove_reader(sock.fileno())
    for _ in range(3):  # the accept's turn, the transport's, its connection_made's
        await asyncio.sleep(0)
    server.close()
    await server.wait_closed()


class AiohttpServer:
    """An aiohttp.web app on 127.0.0.1 in a background loop; ``.url`` is its origin."""

    def __init__(self, app: web.Application, host: str = "127.0.0.1",
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.app = app
        self.host = host
        self.ssl_context = ssl_context  # serve HTTPS (e.g. a trustme certificate)
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    def call(self, coro: Any, timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def __enter__(self) -> AiohttpServer:
        self._thread.start()
        self.call(self._runner.setup())
        self._server = self.call(self._listen())
        return self

    async def _listen(self) -> asyncio.Server:
        # Our own listener rather than a web.TCPSite, so that close_server can close it.
        assert self._runner.server is not None
        return await asyncio.get_running_loop().create_server(
            self._runner.server, self.host, self.port, ssl=self.ssl_context)

    async def _stop(self) -> None:
        assert self._server is not None
        await close_server(self._server)
        await self._runner.cleanup()  # shuts down the connections the server made

    def __exit__(self, *exc: object) -> None:
        self.call(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


def answering(text: str) -> AiohttpServer:
    """An origin answering every GET, whatever its path, with 200 and ``text``."""
    async def answer(request: web.Request) -> web.Response:
        return web.Response(text=text)
    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    return AiohttpServer(app)
