"""``--verbose``: one stderr line per HTTP exchange the CLI makes (spec 4.10).

``svc: GET http://api.localhost:8000/api/developer/apps/game -> 200 in 12 ms``. Only the
method, the URL, the status and the time: never a header (the grant token and API keys
travel in ``Authorization``) and never a body (``keys create`` and ``webhook rotate`` get a
secret back in one). The URL is shown without user info, query values under secret-sounding
names are masked, and anything shaped like one of our secrets is masked wherever it is.

Switched on for one CLI run by :func:`tracing`; the clients wrap their transport in
:class:`Traced`, which passes requests through untouched while tracing is off.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
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


def _line(stream: TextIO, method: str, url: str, outcome: str, started: float) -> None:
    took = (time.monotonic() - started) * 1000
    stream.write(f"svc: {method} {url} -> {outcome} in {took:.0f} ms\n")
    stream.flush()


class Traced(httpx.BaseTransport):
    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        stream = _stream.get()
        if stream is None:
            return self.inner.handle_request(request)
        # Before the inner transport: it may rewrite the URL (svc.loopback).
        method, url, started = request.method, shown_url(request.url), time.monotonic()
        try:
            response = self.inner.handle_request(request)
        except httpx.TransportError as error:
            _line(stream, method, url, f"no answer ({type(error).__name__})", started)
            raise
        _line(stream, method, url, str(response.status_code), started)
        return response

    def close(self) -> None:
        self.inner.close()
