"""A developer's runtime origin on loopback, over HTTPS with a certificate from a test CA.

Tests set what it serves: the manifest (any JSON value, or a handler for odd answers), and
the statuses of the webhook and payment-submitted routes. Every request is recorded.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import trustme
from aiohttp import web

from tests.support.servers import AiohttpServer

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
NAMES = ("localhost", "127.0.0.1", "origin.example.com")
PAY_TO = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"


def good_manifest(app_id: str, slug: str, pay_to: str = PAY_TO, **extra: Any) -> dict[str, Any]:
    return {"appId": app_id, "slug": slug, "payTo": pay_to,
            "webhookPath": "/api/svc/webhook",
            "paymentSubmittedPath": "/api/svc/payment-submitted",
            "appPath": "/", "entryPath": "/", **extra}


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class DeveloperOrigin:
    manifest: object = None
    handler: Handler | None = None  # replaces the manifest route when set
    webhook_status: int = 401
    payment_submitted_status: int = 401
    requests: list[Seen] = field(default_factory=list)
    server: AiohttpServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.port

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(Seen(request.method, request.path_qs, dict(request.headers)))
        if request.path == "/.well-known/svc.json":
            if self.handler is not None:
                return await self.handler(request)
            return web.json_response(self.manifest)
        if request.path == "/api/svc/webhook" and request.method == "POST":
            return web.json_response({"error": "bad signature"}, status=self.webhook_status)
        if request.path == "/api/svc/payment-submitted" and request.method == "POST":
            return web.json_response({"error": "unauthenticated"},
                                     status=self.payment_submitted_status)
        if request.path in ("/", "/play") and request.method in ("GET", "HEAD"):
            return web.Response(text="<h1>Runtime from the developer origin</h1>",
                                content_type="text/html")
        return web.Response(status=404, text="not found")


def server_context(ca: trustme.CA, *names: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*(names or NAMES)).configure_cert(context)
    return context


def client_context(ca: trustme.CA) -> ssl.SSLContext:
    """What the service is given in tests instead of the system trust store."""
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


@contextmanager
def developer_origin(ca: trustme.CA | None, *names: str) -> Iterator[DeveloperOrigin]:
    """HTTPS with a certificate for ``names`` from ``ca``; plain HTTP when ``ca`` is None."""
    origin = DeveloperOrigin()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", origin.handle)
    context = server_context(ca, *names) if ca is not None else None
    with AiohttpServer(app, ssl_context=context) as server:
        origin.server = server
        yield origin
