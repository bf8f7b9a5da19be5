"""The portal's page shell: our own static scripts under a per-response nonce, one
stylesheet, page data as a JSON block, and a strict Content-Security-Policy.

No inline script runs (the JSON block is data, not script); ``require-trusted-types-for``
makes any HTML-from-string sink throw, so scripts can only build the DOM node by node.
The portal origin never runs app code (spec 1.2 rule 2): every script here is ours.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from html import escape

from starlette.responses import HTMLResponse

from portal.assets import Assets

SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    # same-origin, not no-referrer: with no-referrer Chromium sends "Origin: null" on the
    # pages' own POSTs, and the CSRF check needs the real origin. Cross-origin requests
    # (the API host) get no referrer, so a code in our URL never leaves the portal.
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
}


@dataclass(frozen=True)
class Shell:
    assets: Assets
    api_origin: str  # the payment API, which the pages call with CORS
    dev: bool

    def csp(self, nonce: str, frame_ancestors: str) -> str:
        return (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'self'; "
                f"img-src 'self'; connect-src 'self' {self.api_origin}; base-uri 'none'; "
                f"form-action 'self'; object-src 'none'; frame-ancestors {frame_ancestors}; "
                "require-trusted-types-for 'script'; trusted-types 'none'")

    def page(self, title: str, body: str, *, data: Mapping[str, object] | None = None,
             scripts: tuple[str, ...] = (), status: int = 200, embed: bool = False,
             frame_ancestors: str = "'none'") -> HTMLResponse:
        nonce = secrets.token_urlsafe(18)
        tags = "".join(f'<script nonce="{nonce}" src="{self.assets.url(name)}"></script>'
                       for name in scripts)
        payload = ("" if data is None else
                   f'<script type="application/json" id="svc-data">{_json_block(data)}</script>')
        header = "" if embed else (
            '<header class="top"><a class="brand" href="/">svc portal</a>'
            '<nav aria-label="Portal"><a href="/">Apps</a><a href="/account">Account</a></nav>'
            "</header>")
        dev_flag = '<p class="dev-banner" role="note">Dev mode: test network, test USDC</p>' \
            if self.dev and not embed else ""
        html = ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
                f"<title>{escape(title)} · svc portal</title>"
                f"<link rel=\"stylesheet\" href=\"{self.assets.url('portal.css')}\"></head>"
                f"<body class=\"{'embed' if embed else 'full'}\">"
                "<a class=\"skip\" href=\"#content\">Skip to content</a>"
                f"{dev_flag}{header}<main id=\"content\">{body}</main>{payload}{tags}"
                "</body></html>")
        headers = {**SECURITY_HEADERS, "content-security-policy": self.csp(nonce, frame_ancestors)}
        if frame_ancestors == "'none'":
            headers["x-frame-options"] = "DENY"
        return HTMLResponse(html, status_code=status, headers=headers)

    def message(self, title: str, text: str, status: int, *, detail: str = "",
                embed: bool = False, frame_ancestors: str = "'none'") -> HTMLResponse:
        """A page that explains a refusal in words: no script, no form, no link."""
        return self.page(title, f"<h1>{escape(title)}</h1><p>{escape(text)}</p>{detail}",
                         status=status, embed=embed, frame_ancestors=frame_ancestors)


def _json_block(value: object) -> str:
    # Inside <script type=application/json>, "</" or "<!--" would end or confuse the element.
    return (json.dumps(value, sort_keys=True).replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("&", "\\u0026"))
