"""``/svc-auth-return`` on a runtime host: served by us, never proxied (spec 4.7).

The page keeps the summary code on the runtime origin (sessionStorage), hands it to
whoever opened it with ``postMessage`` aimed at this exact origin, and closes the
popup or lets the parent close the modal; a full-page return goes to the entry path.
The code is a sync hint only (spec 1.4 item 9): nothing is granted here.
"""

from __future__ import annotations

import json
import re
from html import escape

from starlette.responses import HTMLResponse

from router.gating import RuntimeRoute
from router.pages import STYLE, csp_hash, gateway_page

MESSAGE_TYPE = "svc:auth-return"
STORAGE_PREFIX = "svc:auth-summary:"
_CODE_RE = re.compile(r"^[A-Za-z0-9._~-]{8,1024}\Z")

SCRIPT = """(function () {
  var data = JSON.parse(document.getElementById("svc-data").textContent);
  var origin = window.location.origin;
  var message = {type: data.type, app: data.app, code: data.code};
  try { window.sessionStorage.setItem(data.storageKey, data.code); } catch (e) {}
  var status = document.getElementById("status");
  if (window.opener && window.opener !== window) {
    try { window.opener.postMessage(message, origin); } catch (e) {}
    window.close();
    status.textContent = "Authorization received. You can close this window.";
    return;
  }
  if (window.parent && window.parent !== window) {
    window.parent.postMessage(message, origin);
    status.textContent = "Authorization received.";
    return;
  }
  // The entry path is resolved on this origin; one that would leave it goes to "/".
  var entry = new URL(data.entryPath, origin);
  if (entry.origin !== origin) { entry = new URL("/", origin); }
  window.location.replace(entry.href);
})();"""

CSP = (f"default-src 'none'; script-src {csp_hash(SCRIPT)}; style-src {csp_hash(STYLE)}; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'self'")


def _json_for_script(value: object) -> str:
    # Inside <script type=application/json>, "</" would end the element early.
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e")


def _is_local_path(path: str) -> bool:
    # "//host/x" and "/<backslash>host/x" (browsers read a backslash as "/") would leave
    # the runtime origin; the script also re-checks the resolved URL's origin.
    return (path.startswith("/") and not path.startswith(("//", "/\\"))
            and path.isprintable())


def auth_return_page(route: RuntimeRoute, query_app: str | None,
                     code: str | None) -> HTMLResponse:
    if query_app != route.slug:
        return gateway_page(400, route.name, "The authorization return is for a different app "
                            "than this address (the app parameter must equal the app slug).")
    if code is None or not _CODE_RE.match(code):
        return gateway_page(400, route.name, "The authorization return has no valid code.")
    entry = route.entry_path if _is_local_path(route.entry_path) else "/"
    data = {"type": MESSAGE_TYPE, "app": route.slug, "code": code,
            "storageKey": STORAGE_PREFIX + route.slug, "entryPath": entry}
    html = ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>Returning to {escape(route.name)}</title><style>{STYLE}</style></head>"
            f"<body><main><h1>Returning to {escape(route.name)}</h1>"
            "<p id=\"status\" role=\"status\">Finishing authorization…</p></main>"
            f"<script type=\"application/json\" id=\"svc-data\">{_json_for_script(data)}</script>"
            f"<script>{SCRIPT}</script></body></html>")
    return HTMLResponse(html, headers={
        "content-security-policy": CSP, "cache-control": "no-store",
        # the code is in our URL: never leak it to the next page via Referer
        "referrer-policy": "no-referrer", "x-content-type-options": "nosniff",
    })
