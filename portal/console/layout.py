"""The console's page shell: one look, one strict Content-Security-Policy.

Inline scripts are allowed only by hash and styles only as the one hashed block below;
nothing is loaded from another origin. Every value put into HTML goes through ``escape``.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from starlette.responses import HTMLResponse

from payments.errors import ApiError
from router.pages import STYLE, csp_hash

CONSOLE_STYLE = STYLE + (
    "main{max-width:56rem;margin:2rem auto}"
    "header{max-width:56rem;margin:1rem auto 0;padding:0 2rem;display:flex;gap:1rem;"
    "align-items:center}header .brand{font-weight:600;margin-right:auto;color:#1d2330}"
    "a{color:#2457d6}a:focus-visible,button:focus-visible,input:focus-visible,"
    "select:focus-visible,summary:focus-visible{outline:3px solid #2457d6;outline-offset:2px}"
    ".skip{position:absolute;left:-999px}.skip:focus{left:1rem;top:1rem;background:#fff;"
    "padding:.5rem}"
    "form.stack{display:grid;gap:.75rem;max-width:28rem}label{font-weight:500}"
    "input[type=text],input[type=email],input[type=password],select{font:inherit;"
    "padding:.4rem .5rem;border:1px solid #8a93a6;border-radius:6px;width:100%;"
    "box-sizing:border-box}"
    "button{font:inherit;padding:.45rem .9rem;border-radius:6px;border:1px solid #2457d6;"
    "background:#2457d6;color:#fff;cursor:pointer}button.secondary{background:#fff;"
    "color:#2457d6}button.danger{background:#fff;color:#a32020;border-color:#a32020}"
    "form.inline{display:inline}fieldset{border:1px solid #d5d9e2;border-radius:8px}"
    ".alert{border-left:4px solid #a32020;background:#fdf0f0;padding:.5rem 1rem;margin:1rem 0}"
    ".notice{border-left:4px solid #1f7a3a;background:#eef8f1;padding:.5rem 1rem;margin:1rem 0}"
    "table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.35rem .5rem;"
    "border-bottom:1px solid #e3e6ec;vertical-align:top}"
    ".secret{display:block;font-size:1.05rem;padding:.75rem;word-break:break-all;"
    "background:#fff8e1;border:1px solid #e0c36a}.hint{color:#5b6475;font-size:.9rem}"
    ".row{display:flex;gap:.5rem;flex-wrap:wrap;align-items:center}"
    "button:disabled{opacity:.55;cursor:not-allowed}td code{white-space:nowrap}"
    "pre{background:#eef0f4;padding:.75rem;border-radius:6px;overflow:auto}"
    "pre code{padding:0}ul.changes{margin:0;padding-left:1rem}"
    "ul.changes code{white-space:pre-wrap;word-break:break-word}"
)

SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    # Not no-referrer: with it Chromium sends "Origin: null" on form posts, and the
    # CSRF check needs the real origin. same-origin still leaks nothing cross-site.
    "referrer-policy": "same-origin",
    # Pages show CSRF tokens and, once, a key secret: never store them.
    "cache-control": "no-store",
    "x-frame-options": "DENY",
    # No other site's window keeps a handle on a console page (or it on theirs): a page
    # opened from a link, or one that opens another, gets no cross-origin opener. The
    # console opens no popup and is opened by none that needs one (the CLI opens a tab).
    "cross-origin-opener-policy": "same-origin",
}


def csp(*scripts: str) -> str:
    script_src = " ".join(csp_hash(s) for s in scripts) or "'none'"
    return (f"default-src 'none'; script-src {script_src}; style-src {csp_hash(CONSOLE_STYLE)}; "
            "img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


@dataclass(frozen=True)
class Nav:
    """The signed-in header: a log-out button needs the session's CSRF token."""

    csrf: str
    username: str


def page(title: str, body: str, *, status: int = 200, nav: Nav | None = None,
         headers: dict[str, str] | None = None, script: str | None = None) -> HTMLResponse:
    header = _header(nav)
    tail = f"<script>{script}</script>" if script else ""
    html = ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<title>{escape(title)} · svc console</title><style>{CONSOLE_STYLE}</style>"
            "</head><body><a class=\"skip\" href=\"#content\">Skip to content</a>"
            f"{header}<main id=\"content\">{body}</main>{tail}</body></html>")
    all_headers = {**SECURITY_HEADERS, "content-security-policy":
                   csp(script) if script else csp(), **(headers or {})}
    return HTMLResponse(html, status_code=status, headers=all_headers)


def _header(nav: Nav | None) -> str:
    if nav is None:
        return ("<header><a class=\"brand\" href=\"/login\">svc developer console</a>"
                "<a href=\"/login\">Log in</a><a href=\"/signup\">Sign up</a></header>")
    return ("<header><a class=\"brand\" href=\"/apps\">svc developer console</a>"
            "<nav aria-label=\"Main\" class=\"row\"><a href=\"/apps\">Apps</a>"
            "<a href=\"/keys\">Organization keys</a>"
            "<a href=\"/device\">CLI sign-in</a>"
            f"<span class=\"hint\">{escape(nav.username)}</span>"
            "<form class=\"inline\" method=\"post\" action=\"/logout\">"
            f"{csrf_field(nav.csrf)}<button class=\"secondary\" type=\"submit\">Log out</button>"
            "</form></nav></header>")


def csrf_field(token: str) -> str:
    return f"<input type=\"hidden\" name=\"csrf\" value=\"{escape(token)}\">"


def attr(value: object) -> str:
    """A value for a double-quoted attribute."""
    return escape(str(value), quote=True)


def alert(error: ApiError | None) -> str:
    """The error sentence a form shows; the code is there for people reporting it."""
    if error is None:
        return ""
    return (f"<div class=\"alert\" role=\"alert\"><p>{escape(error.message)}</p>"
            f"<p class=\"hint\">Error <code>{escape(error.code)}</code> · HTTP {error.status}"
            "</p></div>")


def notice(text: str | None) -> str:
    return f"<div class=\"notice\" role=\"status\"><p>{escape(text)}</p></div>" if text else ""


def error_headers(error: ApiError | None) -> dict[str, str]:
    retry = error.extra.get("retryAfter") if error else None
    return {"retry-after": str(retry)} if isinstance(retry, int) else {}

