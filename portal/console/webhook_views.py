"""HTML of the console's webhook page and of the one page that shows a signing secret.

Views take the wire shapes of ``payments.webhooks.views`` (the API's): an endpoint holds
only its ``zwhsec_…abcd`` preview, an attempt no signature or header (spec 5.6 item 3).
Only ``secret_page`` ever receives a secret. Every value is escaped.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any
from urllib.parse import quote

from starlette.responses import HTMLResponse

from payments.webhooks.models import EVENT_TYPES
from portal.console.app_views import Problem
from portal.console.key_views import COPY_SCRIPT
from portal.console.layout import Nav, alert, attr, csrf_field, error_headers, notice, page

View = dict[str, Any]
RETRYABLE = frozenset({"failed", "skipped"})
PAGE_FIELD = "before"  # a form's hidden field: the list's page it was sent from

NOTICES = {
    "saved": "Endpoint saved.",
    "enabled": "Endpoint enabled: events from now on are sent.",
    "disabled": "Endpoint disabled: events that come due now are skipped, not sent. Its "
                "signing secret is kept.",
    "test-queued": "Test webhook queued: a payment.delivered shaped event with test: true. "
                   "Its row below shows what your endpoint answered.",
    "retried": "Retry queued: the same event, with the same id, is sent again now.",
    "resent": "The skipped events are queued again, oldest first: each is sent once the one "
              "before it has been answered.",
    "nothing-to-resend": "No skipped events were left to send.",
}
EVENT_HINTS = {
    "payment.delivered": "the fulfilment event (spec 6)",
    "payment.settled": "the charge settled on chain",
    "delivery.created": "legacy twin of payment.delivered",
}


@dataclass(frozen=True)
class WebhookState:
    slug: str
    endpoint: View | None
    attempts: list[View]  # one page of the list, newest first
    before: str | None = None  # the cursor of this page (``?before=``); None: the newest
    older: str | None = None  # the list's nextBefore: the page after this one; None: last

    @property
    def paged(self) -> bool:
        """An older page, not the newest events."""
        return self.before is not None


def webhook_page(nav: Nav, state: WebhookState, *, done: str | None = None,
                 problem: Problem | None = None) -> HTMLResponse:
    def at(section: str) -> str:
        return alert(problem.error) if problem and problem.section == section else ""
    s = escape(state.slug)
    base = f"/apps/{attr(state.slug)}"
    if state.endpoint is None:
        sections = _create(nav, base, at("endpoint"), problem)
    else:
        e = state.endpoint
        hook = f"{base}/webhooks/{attr(e['id'])}"
        sections = (f"{_endpoint(nav, e, hook, at('endpoint'), at('resend'), state.before)}"
                    f"{_change(nav, e, hook, problem)}{_secret(nav, e, hook, at('secret'))}"
                    f"{_test(nav, hook, at('test'))}")
    error = problem.error if problem else None
    return page(f"Webhooks of {state.slug}", (
        f"<p><a href=\"{base}\">← {s}</a></p><h1>Webhooks</h1>{notice(NOTICES.get(done or ''))}"
        f"{sections}{_deliveries(nav, base, state, at('deliveries'))}"),
        nav=nav, status=error.status if error else 200, headers=error_headers(error))


def _event_boxes(chosen: list[str]) -> str:
    return "".join(
        f"<label><input type=\"checkbox\" name=\"event\" value=\"{t}\""
        f"{' checked' if t in chosen else ''}> <code>{t}</code></label> "
        f"<span class=\"hint\">{EVENT_HINTS[t]}</span><br>" for t in EVENT_TYPES)


def _typed(problem: Problem | None, section: str, name: str, default: str) -> str:
    if problem and problem.section == section and name in problem.values:
        return problem.values[name]
    return default


def _typed_events(problem: Problem | None, section: str, default: list[str]) -> list[str]:
    if problem and problem.section == section and "events" in problem.values:
        return problem.values["events"].split(",")
    return default


URL_HINT = ("Public HTTPS (spec 5.5): not http, localhost, a private or link-local address, "
            "an internal name or one of the service's own hosts. This app's runtime URL with "
            "the path <code>/api/svc/webhook</code> is accepted once its runtime is active.")


def _create(nav: Nav, base: str, error_html: str, problem: Problem | None) -> str:
    url = _typed(problem, "endpoint", "url", "")
    return (
        "<section id=\"endpoint\" aria-labelledby=\"endpoint-h\"><h2 id=\"endpoint-h\">"
        f"Create the endpoint</h2>{error_html}<p>No webhook endpoint yet. An app has one; "
        "its signing secret is shown once, when it is created.</p>"
        f"<form class=\"stack\" method=\"post\" action=\"{base}/webhooks\">"
        f"{csrf_field(nav.csrf)}<label for=\"url\">Receiver URL</label>"
        f"<input id=\"url\" name=\"url\" type=\"text\" inputmode=\"url\" required "
        f"maxlength=\"8192\" spellcheck=\"false\" value=\"{attr(url)}\" "
        "placeholder=\"https://your-backend.example/api/svc/webhook\" "
        f"aria-describedby=\"url-hint\"><span id=\"url-hint\" class=\"hint\">{URL_HINT}</span>"
        f"<fieldset><legend>Events</legend>"
        f"{_event_boxes(_typed_events(problem, 'endpoint', ['payment.delivered']))}</fieldset>"
        "<button type=\"submit\">Create endpoint</button></form></section>")


def _endpoint(nav: Nav, e: View, hook: str, error_html: str, resend_error: str,
              before: str | None) -> str:
    enabled = e["status"] == "enabled"
    button = ("<button class=\"danger\" type=\"submit\">Disable endpoint</button>" if enabled
              else "<button type=\"submit\">Enable endpoint</button>")
    switch = (f"<form class=\"inline\" method=\"post\" action=\"{hook}\">{csrf_field(nav.csrf)}"
              f"<input type=\"hidden\" name=\"enabled\" value=\"{'false' if enabled else 'true'}"
              f"\">{button}</form>")
    return (
        "<section id=\"endpoint\" aria-labelledby=\"endpoint-h\"><h2 id=\"endpoint-h\">"
        f"Endpoint</h2>{error_html}<dl>"
        f"<dt>Id</dt><dd><code>{escape(e['id'])}</code></dd>"
        f"<dt>Status</dt><dd>{escape(e['status'])}</dd>"
        f"<dt>URL</dt><dd><code>{escape(e['url'])}</code></dd>"
        f"<dt>Events</dt><dd>{escape(', '.join(e['events']))}</dd></dl>"
        f"<p class=\"row\">{switch}<span class=\"hint\">A disabled endpoint keeps its secret; "
        "events that come due meanwhile are skipped.</span></p>"
        f"{_skipped(nav, e, hook, resend_error, before)}</section>")


def _skipped(nav: Nav, e: View, hook: str, error_html: str, before: str | None) -> str:
    count = int(e["skippedWhileDisabled"])
    if not count:
        return error_html
    events = "event" if count == 1 else "events"
    text = (f"{count} {events} came due while this endpoint was disabled and "
            f"{'was' if count == 1 else 'were'} not sent.")
    if e["status"] != "enabled":
        return (f"<div id=\"skipped\" class=\"notice\" role=\"status\"><p>{text} Enable the "
                f"endpoint to resend {'it' if count == 1 else 'them'}.</p></div>{error_html}")
    return (
        f"<div id=\"skipped\" class=\"notice\" role=\"status\"><p>{text}</p>{error_html}"
        f"<form method=\"post\" action=\"{hook}/resend-skipped\">{csrf_field(nav.csrf)}"
        f"{page_field(before)}<button type=\"submit\">Resend {count} skipped {events}"
        "</button></form>"
        "<p class=\"hint\">Same event ids, in the order they were created, one at a time: "
        "each is sent once the one before it has been answered.</p></div>")


def _change(nav: Nav, e: View, hook: str, problem: Problem | None) -> str:
    url = _typed(problem, "change", "url", e["url"])
    error_html = alert(problem.error) if problem and problem.section == "change" else ""
    return (
        "<section id=\"change\" aria-labelledby=\"change-h\"><h2 id=\"change-h\">Change the "
        f"endpoint</h2>{error_html}<form class=\"stack\" method=\"post\" action=\"{hook}\">"
        f"{csrf_field(nav.csrf)}<label for=\"url\">Receiver URL</label>"
        f"<input id=\"url\" name=\"url\" type=\"text\" inputmode=\"url\" required "
        f"maxlength=\"8192\" spellcheck=\"false\" value=\"{attr(url)}\" "
        f"aria-describedby=\"url-hint\"><span id=\"url-hint\" class=\"hint\">{URL_HINT}</span>"
        f"<fieldset><legend>Events</legend>"
        f"{_event_boxes(_typed_events(problem, 'change', e['events']))}"
        "</fieldset><button type=\"submit\">Save endpoint</button></form></section>")


def _secret(nav: Nav, e: View, hook: str, error_html: str) -> str:
    return (
        "<section id=\"secret\" aria-labelledby=\"secret-h\"><h2 id=\"secret-h\">Signing "
        f"secret</h2>{error_html}<p><code>{escape(e['secretPreview'])}</code> "
        f"<span class=\"hint\">made {escape(e['secretCreatedAt'])}; the full secret was shown "
        "once, when it was made.</span></p>"
        f"<form method=\"post\" action=\"{hook}/rotate\">{csrf_field(nav.csrf)}"
        f"<input type=\"hidden\" name=\"secretCreatedAt\" value=\"{attr(e['secretCreatedAt'])}\">"
        "<button class=\"danger\" type=\"submit\">Rotate signing secret</button></form>"
        "<p class=\"hint\">A new secret signs every request from then on, retries of older "
        "events included; the new one is shown once.</p></section>")


def _test(nav: Nav, hook: str, error_html: str) -> str:
    return (
        "<section id=\"test\" aria-labelledby=\"test-h\"><h2 id=\"test-h\">Test</h2>"
        f"{error_html}<form method=\"post\" action=\"{hook}/test\">{csrf_field(nav.csrf)}"
        "<button type=\"submit\">Send test webhook</button></form><p class=\"hint\">A "
        "<code>payment.delivered</code> shaped event with <code>test: true</code> and an "
        "idempotency key <code>webhook-test:&lt;event id&gt;</code>; no charge stands behind "
        "it, so your receiver must not grant anything for it.</p></section>")


def _deliveries(nav: Nav, base: str, state: WebhookState, error_html: str) -> str:
    head = ("<section id=\"deliveries\" aria-labelledby=\"deliveries-h\"><h2 "
            f"id=\"deliveries-h\">Deliveries</h2>{error_html}")
    pages = _pages(base, state)
    if not state.attempts:
        empty = "No older events." if state.paged else "No events yet."
        return f"{head}<p>{empty}</p>{pages}</section>"
    rows = "".join(_attempt_row(nav, base, a, state.before) for a in state.attempts)
    which = "Older events" if state.paged else "Recent events"
    return (
        f"{head}<table><caption class=\"hint\">{which}, newest first. 522: the endpoint "
        "could not be reached or did not answer within 15 s."
        "</caption><thead><tr><th scope=\"col\">Event</th><th scope=\"col\">Type</th>"
        "<th scope=\"col\">Status</th><th scope=\"col\">Requests</th>"
        "<th scope=\"col\">Last answer</th>"
        f"<th scope=\"col\">Next try</th></tr></thead><tbody>{rows}</tbody></table>{pages}"
        "</section>")


def _pages(base: str, state: WebhookState) -> str:
    """Links to the newest page and to the next, older one (the API's ``nextBefore``)."""
    links = []
    if state.paged:
        links.append(f"<a href=\"{base}/webhooks#deliveries\">Newest events</a>")
    if state.older is not None:
        links.append(f"<a href=\"{base}/webhooks?before={quote(state.older, safe='')}"
                     "#deliveries\" rel=\"next\">Older events</a>")
    return f"<nav aria-label=\"Pages\" class=\"row\">{''.join(links)}</nav>" if links else ""


def page_field(before: str | None) -> str:
    """The page a Retry or Resend form was shown on, so its answer goes back there rather
    than to the newest events (``portal.console.webhooks.page_of`` reads it)."""
    if before is None:
        return ""
    return f"<input type=\"hidden\" name=\"{PAGE_FIELD}\" value=\"{attr(before)}\">"


def _attempt_row(nav: Nav, base: str, a: View, before: str | None) -> str:
    status = escape(a["status"])
    if a["inFlight"]:
        status += " (sending)"
    elif a["queuedBehind"]:
        status += " (queued)"
    action = ""
    if a["status"] in RETRYABLE:
        action = (f"<form method=\"post\" action=\"{base}/webhook-attempts/"
                  f"{attr(a['id'])}/retry\">{csrf_field(nav.csrf)}{page_field(before)}"
                  "<button class=\"secondary\" "
                  f"type=\"submit\" aria-label=\"Retry event {attr(a['eventId'])}\">Retry"
                  "</button></form>")
    return (f"<tr><td><code>{escape(a['eventId'])}</code></td>"
            f"<td>{escape(a['type'])}{' (test)' if a['test'] else ''}</td>"
            f"<td>{status}{action}</td><td>{int(a['attemptCount'])}</td>"
            f"<td>{escape(str(a['responseStatus'] or '—'))}"
            f"{_error(a['lastError'])}</td>"
            f"<td>{escape(a['nextAttemptAt'] or '')}</td></tr>")


def _error(last_error: str | None) -> str:
    return f"<br><span class=\"hint\">{escape(last_error)}</span>" if last_error else ""


def secret_page(nav: Nav, slug: str, webhook: View, secret: str, *,
                rotated: bool) -> HTMLResponse:
    """The one page that shows a full signing secret; the layout sends it
    ``Cache-Control: no-store``. Answered to the form's POST, never redirected to."""
    what = "rotated" if rotated else "created"
    use = ("Every request from now on, retries of older events included, is signed with it: "
           "deploy it to your receiver now (accept the old and the new one while you switch)."
           if rotated else "Your receiver verifies each request's x-svc-signature with it.")
    back = f"/apps/{attr(slug)}/webhooks"
    return page(f"Signing secret {what}", (
        "<h1>Copy your signing secret now</h1>"
        "<p><strong>This is the only time the full secret is shown.</strong> Afterwards you "
        f"will see <code>{escape(webhook['secretPreview'])}</code>.</p>"
        f"<code id=\"secret\" class=\"secret\">{escape(secret)}</code>"
        "<p class=\"row\"><button id=\"copy\" type=\"button\">Copy secret</button>"
        "<span id=\"copy-status\" role=\"status\" aria-live=\"polite\"></span></p>"
        f"<dl><dt>App</dt><dd>{escape(slug)}</dd>"
        f"<dt>Endpoint</dt><dd><code>{escape(webhook['id'])}</code></dd>"
        f"<dt>URL</dt><dd><code>{escape(webhook['url'])}</code></dd>"
        f"<dt>Events</dt><dd>{escape(', '.join(webhook['events']))}</dd></dl>"
        f"<p>{use}</p><p>Keep it server-side, e.g. as <code>SVC_WEBHOOK_SECRET</code>; never in "
        "frontend code or a repository.</p>"
        f"<p><a href=\"{back}\">I have stored it: back to the webhooks of {escape(slug)}</a>"
        "</p>"), nav=nav, script=COPY_SCRIPT)
