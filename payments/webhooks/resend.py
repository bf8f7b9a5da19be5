"""Events skipped while the app's endpoint was disabled: how many, and sending them again.

A disabled endpoint's events are ``skipped`` when they come due (``outbox.claim``), not
held back, so enabling it sends nothing by surprise. ``resend_skipped`` sends them on
request, oldest first and one at a time: each row is queued behind the one before it
(``queued_behind``), and ``outbox.finish`` makes it due once that one has been answered.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, case, func, select, update
from sqlalchemy.orm import Session

from payments.errors import ApiError
from payments.ledger.models import AttemptStatus, WebhookAttempt, WebhookEvent
from payments.webhooks.models import EndpointStatus, WebhookEndpoint
from payments.webhooks.outbox import DISABLED, LEGACY_TYPE
from payments.webhooks.wakeup import WAKE

_ATTEMPTS = cast(Table, WebhookAttempt.__table__)


def _skipped_while_disabled(endpoint: WebhookEndpoint) -> tuple[Any, ...]:
    """Real events of the types the endpoint subscribes to that came due while it was
    disabled and have not been sent since: what a resend would send. A legacy subscription
    counts payment.delivered too: claiming it writes the delivery.created twin it wants."""
    types = set(endpoint.events)
    if LEGACY_TYPE in types:
        types.add("payment.delivered")
    return (WebhookEvent.app_id == endpoint.app_id,
            WebhookAttempt.status == AttemptStatus.SKIPPED,
            WebhookAttempt.last_error == DISABLED,
            WebhookEvent.delivery_id.is_not(None),  # test events have none
            WebhookEvent.type.in_(sorted(types)))


def count_skipped_while_disabled(session: Session, endpoint: WebhookEndpoint) -> int:
    return int(session.scalar(
        select(func.count()).select_from(WebhookAttempt)
        .join(WebhookEvent, WebhookEvent.id == WebhookAttempt.event_id)
        .where(*_skipped_while_disabled(endpoint))) or 0)


def resend_skipped(session: Session, endpoint: WebhookEndpoint,
                   now: datetime) -> list[tuple[WebhookAttempt, WebhookEvent]]:
    """Every event skipped while the endpoint was disabled, pending again in the order the
    events were created, each queued behind the one before it (the first due now); the
    same event ids. Only ``skipped`` rows move, under a row lock: a second resend, even a
    concurrent one, finds nothing left to send."""
    if endpoint.status != EndpointStatus.ENABLED:
        raise ApiError("webhook_disabled", 409, "The endpoint is disabled: enable it first, "
                       "then resend the events skipped meanwhile.", webhookId=endpoint.id)
    # A settled_first charge writes payment.delivered and payment.settled in one
    # transaction, at one time: the fulfilment event goes first.
    settled_last = case((WebhookEvent.type == "payment.settled", 1), else_=0)
    rows = [(a, e) for a, e in session.execute(
        select(WebhookAttempt, WebhookEvent)
        .join(WebhookEvent, WebhookEvent.id == WebhookAttempt.event_id)
        .where(*_skipped_while_disabled(endpoint))
        .order_by(WebhookEvent.created_at, settled_last, WebhookEvent.id)
        .with_for_update(of=WebhookAttempt))]
    behind: str | None = None
    params: list[dict[str, str | None]] = []
    for attempt, _ in rows:
        params.append({"b_id": attempt.id, "b_behind": behind})
        behind = attempt.id
    if params:
        # WAKE: the first one is due now; the commit hook wakes this process's dispatcher.
        session.execute(
            update(_ATTEMPTS).where(_ATTEMPTS.c.id == bindparam("b_id"),
                                    _ATTEMPTS.c.status == AttemptStatus.SKIPPED)
            .values(status=AttemptStatus.PENDING, next_attempt_at=now, claim_token=None,
                    queued_behind=bindparam("b_behind"), updated_at=now)
            .execution_options(**WAKE), params)
        session.scalars(select(WebhookAttempt).where(  # the rows as they are now, one query
            WebhookAttempt.id.in_([a.id for a, _ in rows]))
            .execution_options(populate_existing=True)).all()
    return rows
