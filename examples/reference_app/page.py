"""``GET /`` (the shop page), its static files and ``GET /.well-known/svc.json``.

The page runs under a strict CSP: scripts only from this origin and the portal (the modal
script), no inline script (its data is a ``type=application/json`` block), frames only
from the portal and this origin (the modal's iframe, then ``/svc-auth-return``), fetches
only to this origin, the payment API and the portal. No secret is ever in it.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from examples.reference_app.context import context_of
from examples.reference_app.settings import Settings

STATIC = Path(__file__).parent / "static"
STATIC_TYPES = {"app.js": "text/javascript", "app.css": "text/css",
                "favicon.svg": "image/svg+xml"}
WEBHOOK_PATH = "/api/svc/webhook"
PAYMENT_SUBMITTED_PATH = "/api/svc/payment-submitted"


def manifest_of(settings: Settings) -> dict[str, str]:
    """The runtime manifest of spec 2.8, from the settings."""
    return {"appId": settings.app_id, "slug": settings.app_slug, "payTo": settings.pay_to,
            "webhookPath": WEBHOOK_PATH, "paymentSubmittedPath": PAYMENT_SUBMITTED_PATH,
            "appPath": settings.runtime_app_path, "entryPath": settings.runtime_app_path,
            "runtimeOrigin": settings.runtime_origin}


def csp_of(settings: Settings) -> str:
    portal, api = settings.service.portal_url, settings.service.api_url
    return ("default-src 'none'; "
            f"script-src 'self' {portal}; style-src 'self'; img-src 'self'; "
            f"connect-src 'self' {api} {portal}; frame-src 'self' {portal}; "
            "base-uri 'none'; form-action 'self'; object-src 'none'; frame-ancestors 'none'")


async def manifest(request: Request) -> JSONResponse:
    return JSONResponse(manifest_of(context_of(request).settings))


def _data_block(value: object) -> str:
    # Inside <script type=application/json>, "</" would end the element early.
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e")


async def index(request: Request) -> HTMLResponse:
    context = context_of(request)
    settings = context.settings
    buttons = "".join(
        f'<li><button type="button" class="buy" data-product="{escape(item.slug)}" '
        f'data-name="{escape(item.name)}">Buy {escape(item.name)} '
        f'({item.price_atomic / 1_000_000:.2f} USDC)</button></li>'
        for item in context.catalogue.items)
    config = _data_block({"app": settings.app_slug})
    html = f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>{escape(settings.app_slug)}: reference app</title>
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/static/app.css"></head><body data-pending="">
<main>
<h1>{escape(settings.app_slug)}</h1>
<p class="note">The reference developer app: items are granted by this app's server from
signed webhooks, trusted lookups or verified payment proofs, never by this page.</p>
<section id="login-panel"><h2>Log in</h2>
<form id="login-form"><label for="player-name">Player name</label>
<input id="player-name" name="name" maxlength="40" required autocomplete="username">
<button type="submit">Log in</button></form><p id="login-error" class="error" role="alert"></p>
</section>
<section id="player-panel" hidden>
<p>Playing as <strong id="player-name-shown"></strong>
<button type="button" id="logout">Log out</button></p>
<div id="wallet"></div>
<h2>Shop</h2><ul class="shop">{buttons}</ul>
<p id="outcome" role="status"></p>
<h2>Inventory</h2><ul id="inventory"></ul>
<p id="inventory-empty" class="note">Nothing yet.</p>
<button type="button" id="sync">Sync inventory</button>
</section>
</main>
<script type="application/json" id="refapp-config">{config}</script>
<script src="{escape(settings.service.modal_script_url)}"></script>
<script src="/static/app.js"></script>
</body></html>"""
    return HTMLResponse(html, headers={
        "content-security-policy": csp_of(settings), "cache-control": "no-store",
        "x-content-type-options": "nosniff", "referrer-policy": "same-origin"})


async def static_file(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in STATIC_TYPES:
        return JSONResponse({"code": "not_found", "message": "No such file."}, status_code=404)
    return Response((STATIC / name).read_bytes(), media_type=STATIC_TYPES[name],
                    headers={"cache-control": "no-cache", "x-content-type-options": "nosniff"})
