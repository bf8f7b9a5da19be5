"""What a developer does to an app's webhook endpoint and its events, written once for both
front ends: the JSON developer API (``api.py``, which ``svc webhook`` calls) and the
console's pages (``portal.console.webhooks``).

Each function below taking a ``Principal`` is the body of one unit of work run as the
caller: it finds the app with the scope the action needs (``apps:read`` to look,
``webhooks:write`` to change), acts through ``endpoints`` and ``outbox``, and answers wire
shapes (``views``); the signing secret only where it is made. A URL's DNS answers are
checked between two units (``checked_creation`` or ``checked_change``, then ``resolve``),
never inside one: a slow DNS
server must hold no database lock (SQLite locks at BEGIN).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from sqlalchemy import ColumnElement, Select, select, tuple_
from sqlalchemy.orm import Session

from manifest.url_policy import CheckedUrl
from payments.developer.auth import Principal
from payments.errors import ApiError
from payments.http import field_str, field_str_list, required_str
from payments.ledger.models import AttemptStatus, WebhookAttempt, WebhookEvent
from payments.models import App
from payments.webhooks import endpoints, outbox, resend
from payments.webhooks.attempt_cursor import AttemptCursor, next_cursor
from payments.webhooks.models import EVENT_TYPES, WebhookEndpoint, WebhookTry
from payments.webhooks.samples import test_event_payload
from payments.webhooks.services import WebhookServices
from payments.webhooks.views import attempt_view, endpoint_view, iso, try_view

READ, WRITE = "apps:read", "webhooks:write"
MAX_URL = 8192
View = dict[str, Any]


@dataclass(frozen=True)
class EndpointChange:
    """What a change names; ``None`` leaves that part as it is."""

    url: str | None = None
    events: list[str] | None = None
    enabled: bool | None = None


@dataclass(frozen=True)
class AttemptFilter:
    status: AttemptStatus | None = None
    event_type: str | None = None
    before: AttemptCursor | None = None  # attempt_cursor's reading of ``before``
    limit: int = 50


# Input, from a JSON body or a form read into the same shape

def creation_input(body: dict[str, Any]) -> tuple[str, list[str]]:
    url = required_str(body, "url", MAX_URL)
    events = endpoints.parse_events(field_str_list(body, "events", max_items=10),
                                    default=endpoints.DEFAULT_EVENTS)
    return url, events


def change_input(body: dict[str, Any]) -> EndpointChange:
    url = field_str(body, "url", required=False, max_length=MAX_URL)
    raw_events = field_str_list(body, "events", max_items=10)
    events = None if raw_events is None else endpoints.parse_events(raw_events, default=None)
    enabled = body.get("enabled")
    if enabled is not None and not isinstance(enabled, bool):
        raise ApiError("invalid_field", 422, "'enabled' must be true or false.",
                       field="enabled")
    return EndpointChange(url, events, enabled)


def attempt_filter(status: str | None, event_type: str | None, before: AttemptCursor | None,
                   limit: int) -> AttemptFilter:
    if status is not None and status not in {s.value for s in AttemptStatus}:
        raise ApiError("invalid_field", 422, "'status' must be one of "
                       f"{', '.join(s.value for s in AttemptStatus)}.", field="status")
    if event_type is not None and event_type not in EVENT_TYPES:
        raise ApiError("invalid_field", 422, f"'type' must be one of "
                       f"{', '.join(EVENT_TYPES)}.", field="type")
    return AttemptFilter(None if status is None else AttemptStatus(status), event_type,
                         before, limit)


# Checked in a read-only unit, the URL's DNS answers next (``resolve``), then the change

Body = Callable[[], dict[str, Any]]  # the request's fields, read once the caller may act


def checked_creation(session: Session, who: Principal, ref: str, read: Body,
                     s: WebhookServices) -> tuple[str, list[str], CheckedUrl]:
    """What a creation asks for, its URL under this app's text rules. The app is found
    first: one that does not exist or is another organization's is 404 whatever was sent,
    and a caller who may not use it learns nothing of the fields expected."""
    app = who.app(session, ref, WRITE)
    url, events = creation_input(read())
    return url, events, endpoints.check_url(url, app, s.checks)


def checked_change(session: Session, who: Principal, ref: str, hook: str, read: Body,
                   s: WebhookServices) -> tuple[EndpointChange, CheckedUrl | None]:
    """What a change asks for, a new URL under this app's text rules; the app and its
    endpoint are found first, as in ``checked_creation``."""
    app = who.app(session, ref, WRITE)
    endpoints.endpoint_of(session, app, hook)
    wanted = change_input(read())
    return wanted, (None if wanted.url is None else
                    endpoints.check_url(wanted.url, app, s.checks))


async def resolve(checked: CheckedUrl, s: WebhookServices) -> None:
    await anyio.to_thread.run_sync(endpoints.resolve_url, checked, s.checks)


# The endpoint

def endpoint_answer(session: Session, endpoint: WebhookEndpoint) -> View:
    return endpoint_view(endpoint, resend.count_skipped_while_disabled(session, endpoint))


def app_endpoint(session: Session, who: Principal, ref: str) -> tuple[App, View | None]:
    """The app (``apps:read``) and its one endpoint, if it has one."""
    app = who.app(session, ref, READ)
    found = session.scalar(select(WebhookEndpoint).where(WebhookEndpoint.app_id == app.id))
    return app, None if found is None else endpoint_answer(session, found)


def get_endpoint(session: Session, who: Principal, ref: str, hook: str) -> View:
    return endpoint_answer(session, endpoints.endpoint_of(session, who.app(session, ref, READ),
                                                          hook))


def create(session: Session, who: Principal, ref: str, url: str, events: list[str],
           s: WebhookServices) -> tuple[View, str]:
    """The app's one endpoint and its signing secret: the only answer besides rotation's
    that holds it."""
    app = who.app(session, ref, WRITE)
    checked = endpoints.check_url(url, app, s.checks)  # the runtime may have moved since
    created = endpoints.create_endpoint(session, app, checked, events, s.box,
                                        s.developer.clock())
    return endpoint_answer(session, created.endpoint), created.secret


def change(session: Session, who: Principal, ref: str, hook: str, wanted: EndpointChange,
           s: WebhookServices) -> View:
    """The endpoint as changed; its ``skippedWhileDisabled`` says what enabling it left
    unsent (``resend_skipped`` sends those)."""
    app = who.app(session, ref, WRITE)
    endpoint = endpoints.endpoint_of(session, app, hook)
    checked = None if wanted.url is None else endpoints.check_url(wanted.url, app, s.checks)
    endpoints.update_endpoint(endpoint, checked=checked, events=wanted.events,
                              enabled=wanted.enabled, now=s.developer.clock())
    session.flush()
    return endpoint_answer(session, endpoint)


def rotate(session: Session, who: Principal, ref: str, hook: str, s: WebhookServices, *,
           unless_rotated_since: str | None = None) -> tuple[View, str]:
    """A new signing secret. ``unless_rotated_since``: the ``secretCreatedAt`` the caller
    last saw; a secret made after it is not replaced again (a form sent twice, even at
    once: the row is locked before it is compared, so a second rotation waits for the first
    and then sees its secret)."""
    endpoint = endpoints.endpoint_of(session, who.app(session, ref, WRITE), hook,
                                     lock=unless_rotated_since is not None)
    if (unless_rotated_since is not None
            and unless_rotated_since != iso(endpoint.secret_created_at)):
        raise ApiError("webhook_secret_changed", 409, "The signing secret was already "
                       "replaced after this page was loaded, and the new one was shown once "
                       "then; it was not replaced again. Rotate again if you need another.",
                       webhookId=endpoint.id)
    secret = endpoints.rotate_secret(endpoint, s.box, s.developer.clock())
    session.flush()
    return endpoint_answer(session, endpoint), secret


# Events

def queue_test(session: Session, who: Principal, ref: str, hook: str,
               s: WebhookServices) -> View:
    """A test event (spec 6 item 7), queued; its attempt shows the outcome later."""
    app = who.app(session, ref, WRITE)
    endpoints.endpoint_of(session, app, hook)
    now = s.developer.clock()
    payload = test_event_payload(session, app, s.params, now)
    attempt = outbox.enqueue(session, app.id, "payment.delivered", payload, None, now)
    event = session.get(WebhookEvent, payload["id"])
    assert event is not None
    return attempt_view(attempt, event)


def retry(session: Session, who: Principal, ref: str, attempt_ref: str,
          s: WebhookServices) -> View:
    """Manual retry (spec 3.7): the same event, same id, due now."""
    app = who.app(session, ref, WRITE)
    attempt, event = attempt_of(session, app, attempt_ref)
    outbox.retry(session, attempt, s.developer.clock())
    return attempt_view(attempt, event)


def resend_skipped(session: Session, who: Principal, ref: str, hook: str,
                   s: WebhookServices) -> View:
    """Every event skipped while the endpoint was disabled, sent again one at a time in the
    order they were created (``outbox.resend_skipped``)."""
    endpoint = endpoints.endpoint_of(session, who.app(session, ref, WRITE), hook)
    rows = resend.resend_skipped(session, endpoint, s.developer.clock())
    return {"resent": len(rows), "attempts": [attempt_view(a, e) for a, e in rows]}


def list_attempts(session: Session, who: Principal, ref: str,
                  asked: Callable[[], AttemptFilter]) -> View:
    """The app's events and their delivery, newest first by (created_at, event id), at
    most ``wanted.limit``; ``nextBefore`` lists the next, older page (None: no more).
    ``asked`` reads the filter once the app is found: a bad query on an unknown or another
    organization's app is still 404."""
    app = who.app(session, ref, READ)
    wanted = asked()
    rows = session.execute(attempts_page(app.id, wanted)).all()
    shown = rows[:wanted.limit]
    last = shown[-1][1] if len(rows) > wanted.limit else None
    return {"attempts": [attempt_view(a, e) for a, e in shown],
            "nextBefore": None if last is None else next_cursor(last.created_at, last.id)}


def attempts_page(app_id: str, wanted: AttemptFilter) -> Select[WebhookAttempt, WebhookEvent]:
    """One page of the list and one row more (is there an older page). The order is the
    index ``ix_webhook_events_app_created`` (app_id, created_at, id): a page is read from
    it, newest first, instead of sorting every event of the app."""
    q = (select(WebhookAttempt, WebhookEvent)
         .join(WebhookEvent, WebhookEvent.id == WebhookAttempt.event_id)
         .where(WebhookEvent.app_id == app_id))
    if wanted.status is not None:
        q = q.where(WebhookAttempt.status == wanted.status)
    if wanted.event_type is not None:
        q = q.where(WebhookEvent.type == wanted.event_type)
    if wanted.before is not None:
        q = q.where(_older(wanted.before))
    return (q.order_by(WebhookEvent.created_at.desc(), WebhookEvent.id.desc())
            .limit(wanted.limit + 1))


def _older(cursor: AttemptCursor) -> ColumnElement[bool]:
    """What sorts after the cursor's row: events of the same time, as one transaction
    writes them, are told apart by id (the list's second key), so none is skipped."""
    if cursor.event_id is None:  # a bare time: everything created before it
        return WebhookEvent.created_at < cursor.created_at
    # A row comparison, not (created_at < t OR created_at = t AND id < x), which means the
    # same: the planner reads it as the index range to start from, where the OR was a
    # filter over every newer event of the app, so a page deep in the list cost the pages
    # before it.
    return tuple_(WebhookEvent.created_at, WebhookEvent.id) < (cursor.created_at,
                                                                cursor.event_id)


def get_attempt(session: Session, who: Principal, ref: str, attempt_ref: str) -> View:
    """One attempt, the event body as sent and every request: no signature, header or
    secret (spec 5.6 item 3)."""
    attempt, event = attempt_of(session, who.app(session, ref, READ), attempt_ref)
    tries = session.scalars(select(WebhookTry).where(
        WebhookTry.attempt_id == attempt.id).order_by(WebhookTry.id)).all()
    return {"attempt": attempt_view(attempt, event), "event": dict(event.payload),
            "tries": [try_view(t) for t in tries]}


def attempt_of(session: Session, app: App, ref: str) -> tuple[WebhookAttempt, WebhookEvent]:
    """By attempt id (``zwha_``) or event id (``zevt_``): retries are asked for by either."""
    column = WebhookEvent.id if ref.startswith("zevt_") else WebhookAttempt.id
    row = session.execute(
        select(WebhookAttempt, WebhookEvent)
        .join(WebhookEvent, WebhookEvent.id == WebhookAttempt.event_id)
        .where(column == ref, WebhookEvent.app_id == app.id)).first()
    if row is None:
        raise ApiError("webhook_attempt_not_found", 404, f"No webhook attempt or event "
                       f"'{ref}' on app '{app.slug}'.")
    return row[0], row[1]
