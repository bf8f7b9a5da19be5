"""Small server-rendered pages of the runtime host: setup/inactive, gateway errors, 404.

Every page carries a strict Content-Security-Policy: no scripts, one hashed style block.
Nothing here ever shows a secret: only app name, slug and public runtime state.
"""

from __future__ import annotations

import base64
import hashlib
from html import escape

from starlette.responses import HTMLResponse

from router.gating import Gate, RuntimeRoute

STYLE = (
    "body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}"
    "main{max-width:40rem;margin:10vh auto;padding:2rem;background:#fff;border-radius:12px;"
    "box-shadow:0 1px 4px rgba(0,0,0,.08)}h1{font-size:1.4rem;margin-top:0}"
    "dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}"
    "dt{color:#5b6475}code{background:#eef0f4;padding:0 .25rem;border-radius:4px}"
    ".fail{color:#a32020}.pass{color:#1f7a3a}small{color:#5b6475}"
)


def csp_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode()).digest()
    return "'sha256-" + base64.b64encode(digest).decode() + "'"


PAGE_CSP = (f"default-src 'none'; style-src {csp_hash(STYLE)}; img-src 'self'; "
            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

SECURITY_HEADERS = {
    "content-security-policy": PAGE_CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


def render(title: str, body_html: str, status: int,
           headers: dict[str, str] | None = None) -> HTMLResponse:
    html = ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<title>{escape(title)}</title><style>{STYLE}</style></head>"
            f"<body><main>{body_html}</main></body></html>")
    return HTMLResponse(html, status_code=status, headers={**SECURITY_HEADERS, **(headers or {})})


def setup_page(slug: str, route: RuntimeRoute | None, decision: Gate) -> HTMLResponse:
    """The page a visitor (and the developer) sees when a runtime is not being served.

    It shows the runtime's public state and the last verification's checks by rule and
    fix; never the origin, the values a check saw, or any secret (anyone can open it).
    """
    if route is None:
        return render("App not found", (
            f"<h1>There is no app at this address</h1>"
            f"<p>No app is registered with the slug <code>{escape(slug)}</code>. "
            "Check the link you followed.</p>"), 404)
    reasons = "".join(f"<li>{escape(r)}</li>" for r in decision.reasons)
    return render(f"{route.name} is not available", (
        f"<h1>{escape(route.name)} is not available right now</h1>"
        "<p>This app is not being served at the moment. Please try again later.</p>"
        "<h2>For the developer</h2><dl>"
        f"<dt>App</dt><dd><code>{escape(route.slug)}</code></dd>"
        f"<dt>Runtime status</dt><dd><code>{escape(route.runtime_status)}</code></dd>"
        f"<dt>Domain request</dt><dd><code>{escape(route.domain_status)}</code></dd>"
        f"</dl><ul>{reasons}</ul>{_checks_html(route)}"), decision.status,
        headers={"retry-after": "60"} if decision.status == 503 else None)


def _checks_html(route: RuntimeRoute) -> str:
    if not route.checks:
        return ""
    failed = [c for c in route.checks if not c.get("passed")]
    passed = len(route.checks) - len(failed)
    when = (f" <small>({escape(route.checked_at)})</small>" if route.checked_at else "")
    items = "".join(
        f"<li class=\"fail\">Failed: {escape(str(c.get('rule', '')))}"
        + (f" <small>{escape(str(c.get('fix')))}</small>" if c.get("fix") else "")
        + "</li>" for c in failed)
    summary = (f"<p class=\"pass\">Passed: {passed} of {len(route.checks)} checks.</p>"
               if passed else "")
    return (f"<h2>Last verification{when}</h2>{summary}"
            + (f"<ul>{items}</ul>" if items else "")
            + "<p><small>Run <code>svc runtime verify</code> for the values each check saw."
              "</small></p>")


def gateway_page(status: int, name: str, why: str,
                 headers: dict[str, str] | None = None) -> HTMLResponse:
    titles = {502: "The app could not be reached", 504: "The app took too long to answer",
              413: "The request is too large", 400: "Bad request",
              405: "Method not allowed", 503: "Temporarily unavailable",
              414: "The address is too long", 431: "The request headers are too large"}
    title = titles.get(status, "The app could not be served")
    return render(title, f"<h1>{escape(title)}</h1><p>{escape(why)}</p>"
                         f"<p><small>{escape(name)} &middot; HTTP {status}</small></p>", status,
                  headers)


def unknown_host_page() -> HTMLResponse:
    return render("Unknown host", "<h1>Unknown host</h1><p>This service does not answer for "
                  "that host name.</p>", 404)
