"""The console's runtime page: where an app's runtime stands, read-only.

Whether ``<slug>.{apps_domain}`` serves it, and if not why, in the words of the router's
setup page (``payments.runtime.views.not_served_reasons``); the saved origin and paths; the
domain request; the last verification, check by check. Changes go through the developer
API and ``svc runtime``, which the page names for each step.
"""

from __future__ import annotations

from html import escape
from typing import Any

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from payments.developer.auth import Principal
from payments.errors import ApiError
from payments.runtime.views import not_served_reasons, runtime_view
from portal.console.context import Console
from portal.console.layout import Nav, attr, page


class RuntimePage:
    def __init__(self, console: Console) -> None:
        self.c = console

    async def show(self, request: Request) -> Response:
        ref = request.path_params["app"]

        def work(session: Session, who: Principal) -> tuple[dict[str, Any], tuple[str, ...]]:
            app = who.app(session, ref, "apps:read")
            reasons = not_served_reasons(app.status.value, app.kill_switch,
                                         app.runtime_status.value,
                                         app.runtime_domain_request_status.value,
                                         app.runtime_origin)
            return runtime_view(app, self.c.runtime_url(app.slug)), reasons
        try:
            nav, (runtime, reasons) = await self.c.as_developer(request, work)
        except ApiError as error:
            return self.c.failure(request, error)
        return runtime_page(nav, runtime, reasons)


def runtime_page(nav: Nav, r: dict[str, Any], reasons: tuple[str, ...]) -> HTMLResponse:
    slug = escape(r["app"])
    if reasons:
        served = ("<div class=\"alert\" role=\"status\"><p>Not served: "
                  f"<code>{escape(r['url'])}</code> shows a setup page.</p><ul>"
                  + "".join(f"<li>{_code_spans(reason)}</li>" for reason in reasons)
                  + "</ul></div>")
    else:
        served = (f"<div class=\"notice\" role=\"status\"><p>Served at <a href=\""
                  f"{attr(r['url'])}/\">{escape(r['url'])}</a>, proxied to the origin below."
                  "</p></div>")
    rows = (("Status", escape(r["status"])),
            ("Origin", f"<code>{escape(r['origin'])}</code>" if r["origin"] else "not saved"),
            ("App path", f"<code>{escape(r['appPath'] or '/')}</code>"),
            ("Entry path", f"<code>{escape(r['entryPath'] or '/')}</code>"),
            ("Domain request", escape(r["domainRequestStatus"])),
            ("Hosted review", escape(r["hostedReviewStatus"])),
            ("Verified", escape(r["verifiedAt"] or "never")),
            ("Last checked", escape(r["checkedAt"] or "never")))
    details = "<dl>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"
    return page(f"Runtime of {r['app']}", (
        f"<p><a href=\"/apps/{slug}\">← {slug}</a></p><h1>Runtime</h1>{served}{details}"
        f"<h2>Last verification</h2>{_report(r['lastReport'])}"
        "<h2>Commands</h2><ul>"
        f"<li>save the origin: <code>svc runtime configure --app {slug} --origin "
        "https://game.example.com</code></li>"
        f"<li>verify its manifest and routes: <code>svc runtime verify --app {slug}</code></li>"
        f"<li>ask for the domain: <code>svc runtime request-domain --app {slug}</code></li>"
        f"<li>stop serving it: <code>svc runtime disable --app {slug}</code></li></ul>"),
        nav=nav)


def _report(report: dict[str, Any] | None) -> str:
    if report is None:
        return "<p>Not verified yet.</p>"
    rows = "".join(
        f"<tr><td><code>{escape(str(c.get('id', '')))}</code></td>"
        f"<td>{escape(str(c.get('rule', '')))}</td>"
        f"<td>{'passed' if c.get('passed') else '<strong>failed</strong>'}</td>"
        f"<td>{escape(str(c.get('seen') or ''))}</td>"
        f"<td>{escape(str(c.get('expected') or ''))}</td>"
        f"<td>{escape(str(c.get('fix') or ''))}</td></tr>" for c in report["checks"])
    verdict = "Every check passed." if report["passed"] else "Some checks failed."
    return (f"<p>{verdict}</p><table><thead><tr><th scope=\"col\">Check</th>"
            "<th scope=\"col\">Rule</th><th scope=\"col\">Result</th><th scope=\"col\">Seen"
            "</th><th scope=\"col\">Expected</th><th scope=\"col\">Fix</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def _code_spans(sentence: str) -> str:
    """A reason with its `command` in <code> (the setup page's sentences use backticks)."""
    parts = escape(sentence).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))
