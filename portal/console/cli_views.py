"""HTML of CLI sign-in approval (spec 5.3): the device-code form and the approve page."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from html import escape

from starlette.responses import HTMLResponse

from payments.errors import ApiError
from portal.console.layout import Nav, alert, attr, csrf_field, error_headers, page

SCOPE_MEANINGS = {
    "apps:read": "read this app's settings, products and keys (masked)",
    "apps:write": "change this app's settings",
    "products:write": "create and change products",
    "webhooks:write": "set the webhook endpoint",
    "runtime:write": "configure the runtime origin",
    "keys:create": "create and revoke this app's backend API keys",
}


@dataclass(frozen=True)
class PendingView:
    user_code: str
    app_slug: str | None
    scopes: list[str]
    ttl_seconds: int
    expires_at: datetime


def lifetime(seconds: int) -> str:
    """``7200`` -> ``2 hours``; ``5400`` -> ``1 hour 30 minutes``."""
    parts = []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {unit}{'' if count == 1 else 's'}")
    return " ".join(parts) or "under a minute"


def device_page(nav: Nav, code: str = "", error: ApiError | None = None) -> HTMLResponse:
    return page("CLI sign-in", (
        "<h1>Sign in the svc CLI</h1>"
        "<p>Enter the code that <code>svc auth device</code> printed in your terminal.</p>"
        f"{alert(error)}<form class=\"stack\" method=\"get\" action=\"/cli/approve\">"
        "<label for=\"code\">Code</label>"
        f"<input id=\"code\" name=\"code\" type=\"text\" required autocomplete=\"off\" "
        f"autocapitalize=\"characters\" spellcheck=\"false\" placeholder=\"XXXX-XXXX\" "
        f"value=\"{attr(code)}\"><button type=\"submit\">Continue</button></form>"),
        nav=nav, status=error.status if error else 200, headers=error_headers(error))


def approve_page(nav: Nav, pending: PendingView, my_apps: list[tuple[str, str]],
                 error: ApiError | None = None) -> HTMLResponse:
    if pending.app_slug is not None:
        app_html = (f"<code>{escape(pending.app_slug)}</code>"
                    f"<input type=\"hidden\" name=\"app\" value=\"{attr(pending.app_slug)}\">")
    elif my_apps:
        options = "".join(f"<option value=\"{attr(slug)}\">{escape(name)} ({escape(slug)})"
                          "</option>" for slug, name in my_apps)
        app_html = (f"<label for=\"app\">The CLI did not name an app; choose one</label>"
                    f"<select id=\"app\" name=\"app\" required>{options}</select>")
    else:
        app_html = ("You have no apps yet: <a href=\"/apps/new\">create one</a> first, then "
                    "reload this page.")
    scopes = "".join(f"<li><code>{escape(s)}</code>: {escape(SCOPE_MEANINGS.get(s, s))}</li>"
                     for s in pending.scopes)
    return page("Approve CLI sign-in", (
        "<h1>Approve a CLI sign-in?</h1>"
        "<p>A command line asked for a grant. Approve only if you started it and the code "
        "matches the one in your terminal.</p>"
        f"{alert(error)}<form method=\"post\" action=\"/cli/approve\">"
        f"{csrf_field(nav.csrf)}"
        f"<input type=\"hidden\" name=\"code\" value=\"{attr(pending.user_code)}\">"
        f"<dl><dt>Code</dt><dd><code>{escape(pending.user_code)}</code></dd>"
        f"<dt>App</dt><dd>{app_html}</dd>"
        f"<dt>Scopes</dt><dd><ul>{scopes}</ul></dd>"
        f"<dt>Lifetime</dt><dd>{lifetime(pending.ttl_seconds)} after approval</dd>"
        f"<dt>Request expires</dt><dd>{pending.expires_at:%Y-%m-%d %H:%M} UTC</dd></dl>"
        "<p class=\"hint\">A grant is not an API key: it reaches only the developer API, for "
        "this one app, and cannot run settlement, reviews or admin tasks.</p>"
        "<div class=\"row\"><button type=\"submit\" name=\"decision\" value=\"approve\">"
        "Approve</button><button class=\"danger\" type=\"submit\" name=\"decision\" "
        "value=\"deny\">Deny</button></div></form>"),
        nav=nav, status=error.status if error else 200, headers=error_headers(error))


def answered_page(nav: Nav, status: str, app_slug: str | None) -> HTMLResponse:
    if status == "approved":
        body = ("<h1>CLI sign-in approved</h1><p>Return to your terminal: the CLI finishes "
                f"signing in for <code>{escape(app_slug or '')}</code> on its own.</p>")
    else:
        body = ("<h1>CLI sign-in denied</h1><p>The CLI will report that the sign-in was "
                "denied. Nothing was granted.</p>")
    return page("CLI sign-in", body + "<p><a href=\"/apps\">Back to your apps</a></p>", nav=nav)
