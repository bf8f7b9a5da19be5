"""``--verbose``: one stderr line per HTTP exchange the CLI makes (spec 4.10).

``svc: GET http://api.localhost:8000/api/developer/apps/game -> 200 in 12 ms``. Only the
method, the URL, the status and the time: never a header (the grant token and API keys
travel in ``Authorization``) and never a body (``keys create`` and ``webhook rotate`` get a
secret back in one). The URL is shown without user info, query values under secret-sounding
names are masked, and anything shaped like one of our secrets is masked wherever it is.

Switched on for one CLI run by :func:`tracing`; the clients wrap their transport in
:class:`Traced` (:class:`AsyncTraced` for ``AsyncBackendClient``), which pass requests
through untouched while tracing is off.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import TracebackType
from typing import TextIO
from urllib.parse import parse_qsl, urlencode

import httpx

MASK = "[redacted]"
_SECRET = re.compile(r"\b(?:zpk|zcli|zwhsec|sum|pay)_[A-Za-z0-9_.~-]+")
_SECRET_NAMES = re.compile(r"code|token|key|secret|signature|password|auth", re.IGNORECASE)
_stream: ContextVar[TextIO | None] = ContextVar("svc_trace_stream", default=None)


@contextmanager
def tracing(stream: TextIO | None) -> Iterator[None]:
    """Trace every request made inside the block to ``stream`` (None: do not)."""
    token = _stream.set(stream)
    try:
        yield
    finally:
        _stream.reset(token)


def shown_url(url: httpx.URL) -> str:
    query = [(k, MASK if _SECRET_NAMES.search(k) else v)
             for k, v in parse_qsl(url.query.decode("ascii", "replace"),
                                   keep_blank_values=True)]
    bare = url.copy_with(username=None, password=None, query=None, fragment=None)
    text = str(bare) + (f"?{urlencode(query, safe='[]')}" if query else "")
    return _SECRET.sub(lambda m: m.group(0).split("_", 1)[0] + "_" + MASK, text)


class _Exchange:
    """One request's trace line, written when the answer's head arrives or the request
    fails without one. The sync and async transports differ only in how they await."""

    def __init__(self, request: httpx.Request) -> None:
        self.stream = _stream.get()
        # Before the inner transport: it may rewrite the URL (svc.loopback).
        self.method, self.started = request.method, time.monotonic()
        self.url = shown_url(request.url) if self.stream is not None else ""

    def __enter__(self) -> _Exchange:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if isinstance(error, httpx.TransportError):
            self._line(f"no answer ({type(error).__name__})")

    def answered(self, response: httpx.Response) -> httpx.Response:
        self._line(str(response.status_code))
        return response

    def _line(self, outcome: str) -> None:
        if self.stream is None:
            return
        took = (time.monotonic() - self.started) * 1000
        self.stream.write(f"svc: {self.method} {self.url} -> {outcome} in {took:.0f} ms\n")
        self.stream.flush()


class Traced(httpx.BaseTransport):
    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        with _Exchange(request) as exchange:
            return exchange.answered(self.inner.handle_request(request))

    def close(self) -> None:
        self.inner.close()


class AsyncTraced(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        with _Exchange(request) as exchange:
            return exchange.answered(await self.inner.handle_async_request(request))

    async def aclose(self) -> None:
        await self.inner.aclose()
