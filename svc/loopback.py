"""``localhost`` names are loopback, whatever the system resolver says (RFC 6761 6.3).

``svc-server dev`` serves the API at ``http://api.localhost:8000``. Browsers resolve
``*.localhost`` to loopback themselves; many resolvers (glibc without systemd's
nss-myhostname, as on a plain Debian) answer "not found". The SDK's clients therefore
connect to 127.0.0.1 for such names while the ``Host`` header keeps the name, which is what
the service dispatches on. Only plain ``http``: TLS would need the name as SNI and a
certificate for it, which no local dev server has.
"""

from __future__ import annotations

import httpx

LOOPBACK = "127.0.0.1"


def is_localhost_name(host: str) -> bool:
    host = host.lower().rstrip(".")
    return host == "localhost" or host.endswith(".localhost")


class LoopbackNames(httpx.BaseTransport):
    """Sends ``http://*.localhost`` requests to 127.0.0.1; the rest as they are."""

    def __init__(self, inner: httpx.BaseTransport | None = None) -> None:
        self.inner = inner or httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme == "http" and is_localhost_name(request.url.host):
            # The Host header was set from the original URL when the request was built.
            request.url = request.url.copy_with(host=LOOPBACK)
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


class AsyncLoopbackNames(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme == "http" and is_localhost_name(request.url.host):
            request.url = request.url.copy_with(host=LOOPBACK)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()
