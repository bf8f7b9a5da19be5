"""The small developer origin that ``svc-server dev`` starts behind the demo runtime.

It serves the runtime manifest, a page at ``/`` and ``/echo``, which answers with the
request headers it received and sets a cookie, so the router's cookie stripping and
forwarding headers are visible in a browser.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

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
    # The service's portal, which serves the runtime modal script the wallet page loads.
    portal_url: str = ""


PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Demo runtime</title></head><body>
<h1>Demo runtime</h1>
<p>This page comes from the developer origin, served through the service's runtime router.</p>
<p><a href="/echo">/echo</a> shows the headers the origin received (no <code>cookie</code>,
forwarding headers set by the router) and tries to set a cookie the router strips.</p>
<p><a href="/wallet">/wallet</a> pays through the service's runtime modal: log in, enable
payment in the modal, buy.</p>
</body></html>"""

# A runtime page using the service's modal script (spec 3.8): no inline script, so it would
# run under a strict CSP too. What it shows after paying is UI feedback only; a real app
# grants from its webhook (spec 1.4).
WALLET_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="svc-app" content="{slug}"><title>Demo runtime: wallet</title></head><body>
<h1>Demo runtime: wallet</h1>
<p>This page belongs to the app. The wallet card below comes from the service's script.</p>
<p><button id="login" type="button">Log in as Player One</button></p>
<div id="wallet"></div>
<h2>Buy</h2>
<p><button type="button" class="buy" data-product="retry">Buy Retry / Continue (0.01 USDC)
</button> <button type="button" class="buy" data-product="unlock-level">Buy Unlock Level
(0.03 USDC)</button></p>
<p id="outcome" role="status"></p>
<script src="{portal_url}/sdk/svc-modal.js"></script>
<script src="/wallet.js"></script>
</body></html>"""

WALLET_SCRIPT = """(function () {
  var slug = document.querySelector("meta[name=svc-app]").getAttribute("content");
  var outcome = document.getElementById("outcome");
  function login() { wallet.setGameAccount("Player One"); }
  var wallet = window.SvcWallet.mount(document.getElementById("wallet"),
                                      {app: slug, gameAccount: null, onLogin: login});
  window.demoWallet = wallet;
  document.getElementById("login").addEventListener("click", login);
  Array.prototype.forEach.call(document.querySelectorAll("button.buy"), function (button) {
    button.addEventListener("click", function () {
      outcome.textContent = "Paying...";
      wallet.pay(button.getAttribute("data-product"), {developerUserId: "player-one"})
        .then(function (paid) {
          outcome.textContent = "Paid: delivery " + paid.deliveryId + ". The app's server " +
            "grants it when the signed webhook arrives.";
        }, function (error) { outcome.textContent = "Not paid: " + error.message; });
    });
  });
})();
"""


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

    async def wallet(request: Request) -> HTMLResponse:
        return HTMLResponse(WALLET_PAGE.format(slug=escape(identity.slug),
                                               portal_url=escape(identity.portal_url)))

    async def wallet_script(request: Request) -> Response:
        return Response(WALLET_SCRIPT, media_type="text/javascript")

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
        Route("/wallet", wallet, methods=["GET", "HEAD"]),
        Route("/wallet.js", wallet_script, methods=["GET", "HEAD"]),
        Route("/echo", echo, methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]),
        Route("/api/svc/webhook", unsigned, methods=["POST"]),
        Route("/api/svc/payment-submitted", unsigned, methods=["POST"]),
    ])
