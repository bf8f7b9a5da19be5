"""The console's webhook page: the app's endpoint and its recent events, read-only.

It never shows the signing secret (only its ``zwhsec_…abcd`` preview), a signature or a
request header (spec 5.6 item 3); changes go through the developer API and ``svc webhook``.
"""

from __future__ import annotations

from html import escape
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from payments.developer.auth import Principal
from payments.errors import ApiError
from payments.ledger.models import WebhookAttempt, WebhookEvent
from payments.webhooks.models import WebhookEndpoint
from payments.webhooks.operations import endpoint_answer
from payments.webhooks.views import attempt_view
from portal.console.context import Console
from portal.console.layout import Nav, page

RECENT = 50


class WebhookPage:
    def __init__(self, console: Console) -> None:
        self.c = console

    async def show(self, request: Request) -> Response:
        ref = request.path_params["app"]

        def work(session: Session, who: Principal) -> tuple[str, dict[str, Any] | None,
                                                            list[dict[str, Any]]]:
            app = who.app(session, ref, "apps:read")
            endpoint = session.scalar(select(WebhookEndpoint).where(
                WebhookEndpoint.app_id == app.id))
            rows = session.execute(
                select(WebhookAttempt, WebhookEvent)
                .join(WebhookEvent, WebhookEvent.id == WebhookAttempt.event_id)
                .where(WebhookEvent.app_id == app.id)
                .order_by(WebhookEvent.created_at.desc(), WebhookEvent.id.desc())
                .limit(RECENT)).all()
            return (app.slug, endpoint_answer(session, endpoint) if endpoint else None,
                    [attempt_view(a, e) for a, e in rows])
        try:
            nav, (slug, endpoint, attempts) = await self.c.as_developer(request, work)
        except ApiError as error:
            return self.c.failure(request, error)
        return webhook_page(nav, slug, endpoint, attempts)


def webhook_page(nav: Nav, slug: str, endpoint: dict[str, Any] | None,
                 attempts: list[dict[str, Any]]) -> HTMLResponse:
    s = escape(slug)
    if endpoint is None:
        about = (f"<p>No webhook endpoint yet. Create it with <code>svc webhook upsert --app "
                 f"{s} --url https://your-backend.example/api/svc/webhook</code>; the signing "
                 "secret is shown once then.</p>")
    else:
        about = (
            "<dl>"
            f"<dt>Endpoint</dt><dd><code>{escape(endpoint['id'])}</code> "
            f"({escape(endpoint['status'])})</dd>"
            f"<dt>URL</dt><dd><code>{escape(endpoint['url'])}</code></dd>"
            f"<dt>Events</dt><dd>{escape(', '.join(endpoint['events']))}</dd>"
            f"<dt>Signing secret</dt><dd><code>{escape(endpoint['secretPreview'])}</code> "
            "(shown once, at creation or rotation; rotate with <code>svc webhook rotate"
            "</code>)</dd></dl>")
    rows = "".join(
        f"<tr><td><code>{escape(a['eventId'])}</code></td>"
        f"<td>{escape(a['type'])}{' (test)' if a['test'] else ''}</td>"
        f"<td>{escape(a['status'])}{' (sending)' if a['inFlight'] else ''}</td>"
        f"<td>{a['attemptCount']}</td><td>{a['responseStatus'] or '—'}</td>"
        f"<td>{escape(a['lastError'] or '')}</td>"
        f"<td>{escape(a['nextAttemptAt'] or '')}</td></tr>" for a in attempts)
    table = ("<table><caption class=\"hint\">Recent events, newest first. 522: the "
             "endpoint could not be reached or did not answer within 15 s.</caption><thead>"
             "<tr><th scope=\"col\">Event</th><th scope=\"col\">Type</th>"
             "<th scope=\"col\">Status</th><th scope=\"col\">Requests</th>"
             "<th scope=\"col\">Last answer</th><th scope=\"col\">Last error</th>"
             "<th scope=\"col\">Next try</th></tr></thead>"
             f"<tbody>{rows}</tbody></table>") if attempts else "<p>No events yet.</p>"
    return page(f"Webhooks of {slug}", (
        f"<p><a href=\"/apps/{s}\">← {s}</a></p><h1>Webhooks</h1>{about}"
        f"<h2>Deliveries</h2>{table}"
        f"<p class=\"hint\">Retry one with <code>svc webhook retry --app {s} EVENT_ID</code> "
        "(the same event id is sent again).</p>"), nav=nav)
