"""The small developer origin that ``svc-server dev`` starts behind the demo runtime.

It serves the runtime manifest, a page at ``/`` and ``/echo``, which answers with the
request headers it received and sets a cookie, so the router's cookie stripping and
forwarding headers are visible in a browser.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route


@dataclass(frozen=True)
class DemoIdentity:
    app_id: str
    slug: str
    pay_to: str
    runtime_origin: str


PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Demo runtime</title></head><body>
<h1>Demo runtime</h1>
<p>This page comes from the developer origin, served through the service's runtime router.</p>
<p><a href="/echo">/echo</a> shows the headers the origin received (no <code>cookie</code>,
forwarding headers set by the router) and tries to set a cookie the router strips.</p>
</body></html>"""


def demo_origin(identity: DemoIdentity) -> Starlette:
    async def manifest(request: Request) -> JSONResponse:
        return JSONResponse({
            "appId": identity.app_id, "slug": identity.slug, "payTo": identity.pay_to,
            "webhookPath": "/api/svc/webhook",
            "paymentSubmittedPath": "/api/svc/payment-submitted",
            "appPath": "/", "entryPath": "/", "runtimeOrigin": identity.runtime_origin,
        })

    async def index(request: Request) -> HTMLResponse:
        return HTMLResponse(PAGE)

    async def echo(request: Request) -> Response:
        body = await request.body()
        response = JSONResponse({
            "method": request.method, "path": request.url.path,
            "query": request.url.query, "bodyBytes": len(body),
            "headers": [[k, v] for k, v in request.headers.items()],
        })
        response.set_cookie("demo_origin_cookie", "set-by-origin", httponly=True)
        return response

    async def unsigned(request: Request) -> JSONResponse:
        # Real routes that refuse unsigned calls: runtime verification probes expect 401.
        return JSONResponse({"error": "signature required"}, status_code=401)

    return Starlette(routes=[
        Route("/.well-known/svc.json", manifest, methods=["GET", "HEAD"]),
        Route("/", index, methods=["GET", "HEAD"]),
        Route("/echo", echo, methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]),
        Route("/api/svc/webhook", unsigned, methods=["POST"]),
        Route("/api/svc/payment-submitted", unsigned, methods=["POST"]),
    ])
