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
    app_html, approvable = _app_choice(pending.app_slug, my_apps)
    scopes = "".join(f"<li><code>{escape(s)}</code>: {escape(SCOPE_MEANINGS.get(s, s))}</li>"
                     for s in pending.scopes)
    approve = ("<button type=\"submit\" name=\"decision\" value=\"approve\">Approve</button>"
               if approvable else "")
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
        f"<div class=\"row\">{approve}<button class=\"danger\" type=\"submit\" "
        "name=\"decision\" value=\"deny\">Deny</button></div></form>"),
        nav=nav, status=error.status if error else 200, headers=error_headers(error))


def _app_choice(asked: str | None, my_apps: list[tuple[str, str]]) -> tuple[str, bool]:
    """The App row's HTML, and whether there is an app to approve the sign-in for."""
    if asked is not None and asked in {slug for slug, _ in my_apps}:
        return (f"<code>{escape(asked)}</code>"
                f"<input type=\"hidden\" name=\"app\" value=\"{attr(asked)}\">"), True
    if asked is not None:
        # The request endpoint cannot tell (it is unauthenticated and must not say which apps
        # exist); here the signed-in developer learns only about their own organization.
        # Denying ends the CLI's wait at its next poll instead of after the 10 minutes.
        return ("<p class=\"alert\" role=\"alert\">There is no app "
                f"<code>{escape(asked)}</code> in your organization, so this sign-in cannot be "
                "approved. <strong>Deny</strong> it to stop the command waiting, then run it "
                f"again with <code>--app</code> set to {_slugs(my_apps)}.</p>"), False
    if my_apps:
        options = "".join(f"<option value=\"{attr(slug)}\">{escape(name)} ({escape(slug)})"
                          "</option>" for slug, name in my_apps)
        return (f"<label for=\"app\">The CLI did not name an app; choose one</label>"
                f"<select id=\"app\" name=\"app\" required>{options}</select>"), True
    return ("You have no apps yet: <a href=\"/apps/new\">create one</a> first, then reload "
            "this page, or <strong>Deny</strong> this sign-in."), False


def _slugs(my_apps: list[tuple[str, str]]) -> str:
    if not my_apps:
        return "an app of yours (you have none yet: <a href=\"/apps/new\">create one</a>)"
    shown = ", ".join(f"<code>{escape(slug)}</code>" for slug, _ in my_apps[:10])
    more = f", … ({len(my_apps) - 10} more on <a href=\"/apps\">Apps</a>)" \
        if len(my_apps) > 10 else ""
    return f"one of your apps: {shown}{more}"


def answered_page(nav: Nav, status: str, app_slug: str | None) -> HTMLResponse:
    if status == "approved":
        body = ("<h1>CLI sign-in approved</h1><p>Return to your terminal: the CLI finishes "
                f"signing in for <code>{escape(app_slug or '')}</code> on its own.</p>")
    else:
        body = ("<h1>CLI sign-in denied</h1><p>The CLI will report that the sign-in was "
                "denied. Nothing was granted.</p>")
    return page("CLI sign-in", body + "<p><a href=\"/apps\">Back to your apps</a></p>", nav=nav)
