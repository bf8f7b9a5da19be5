"""The outbox, in SQL: claiming due attempts, recording outcomes, manual retries, test events.

Claiming is one statement per batch: ``UPDATE webhook_attempts SET next_attempt_at = now +
lease, claim_token = :t WHERE id IN (SELECT id ... WHERE status = 'pending' AND
next_attempt_at <= now ORDER BY next_attempt_at LIMIT :n FOR UPDATE SKIP LOCKED)``. On
PostgreSQL concurrent dispatchers skip each other's rows; SQLite takes its write lock at
``BEGIN`` so claims are serialized. The lease is the crash story: a dispatcher killed
mid-send never records an outcome, its rows become due again when the lease passes, and
another dispatcher sends them (at least once). The token makes the outcome the holder's
alone: a late writer whose lease was taken over changes nothing.

Recording an outcome also does, in the same transaction, what follows from it: a 2xx to a
delivery's fulfilment event marks the delivery ``fulfilled``, and a row queued behind the
answered one (a resend of skipped events, oldest first) becomes due.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import (
    CursorResult,
    Select,
    Table,
    bindparam,
    delete,
    exists,
    insert,
    select,
    update,
)
from sqlalchemy.orm import Session, aliased

from payments.errors import ApiError
from payments.ids import IdPrefix, new_id
from payments.ledger.models import AttemptStatus, Delivery, WebhookAttempt, WebhookEvent
from payments.models import App, serves_runtime
from payments.webhooks.models import EndpointStatus, WebhookEndpoint, WebhookTry
from payments.webhooks.schedule import Next, Outcome
from payments.webhooks.signing_secrets import SecretBox, SecretUnreadable
from payments.webhooks.wakeup import WAKE

LEGACY_TYPE = "delivery.created"
# The events a receiver answers 2xx to only after fulfilling (spec 3.7, 6 receiver rule 2):
# the fulfilment event and its legacy twin. payment.settled is a settlement notice.
FULFILMENT_TYPES = ("payment.delivered", LEGACY_TYPE)
DISABLED = "endpoint_disabled"  # last_error of an event skipped while the endpoint was off

_ATTEMPTS = cast(Table, WebhookAttempt.__table__)
_TRIES = cast(Table, WebhookTry.__table__)
_FINISH = (
    update(_ATTEMPTS)
    .where(_ATTEMPTS.c.id == bindparam("b_id"), _ATTEMPTS.c.claim_token == bindparam("b_token"))
    .values(status=bindparam("b_status"), attempt_count=bindparam("b_count"),
            next_attempt_at=bindparam("b_next"), response_status=bindparam("b_response"),
            signed=bindparam("b_signed"), last_error=bindparam("b_error"),
            endpoint_id=bindparam("b_endpoint"), delivered_at=bindparam("b_delivered"),
            updated_at=bindparam("b_now"), claim_token=None)
)
_INSERT_TRY = insert(_TRIES)
_DELIVERIES = cast(Table, Delivery.__table__)
# Locked in id order (PostgreSQL; SQLite has one writer): two dispatchers marking the same
# deliveries cannot deadlock. Core, built once: it runs after most successful requests.
_FULFIL = (
    update(_DELIVERIES)
    .where(_DELIVERIES.c.id.in_(
        select(_DELIVERIES.c.id)
        .where(_DELIVERIES.c.id.in_(bindparam("b_ids", expanding=True)),
               _DELIVERIES.c.fulfilled.is_(False))
        .order_by(_DELIVERIES.c.id).with_for_update().scalar_subquery()))
    .values(fulfilled=True)
)


@dataclass(frozen=True)
class Job:
    """One claimed attempt, with everything needed to send it and nothing more."""

    attempt_id: str
    claim_token: str
    lease_until: datetime
    number: int  # this request's number for the event: attempt_count + 1
    event_id: str
    event_type: str
    payload: dict[str, Any]
    delivery_id: str | None  # None for test events: no delivery row stands behind them
    queued: bool  # rows wait behind this one (a resend): its outcome lets them go
    app_slug: str
    runtime_active: bool
    endpoint_id: str
    url: str
    secret: str | None  # None: the sealed secret does not open (recorded, not sent)


@dataclass(frozen=True)
class Result:
    job: Job
    outcome: Outcome
    next: Next
    sent_at: datetime
    duration_ms: int
    signed: bool


def claim(session: Session, now: datetime, limit: int, lease: timedelta, box: SecretBox,
          secret_cache: dict[tuple[str, str], str] | None = None) -> list[Job]:
    """Claim up to ``limit`` due attempts and return the sendable ones.

    In the same transaction, attempts that have nowhere to go (no endpoint, a disabled one,
    a type it does not subscribe to) become ``skipped``, and a first ``payment.delivered``
    for an endpoint subscribed to the legacy ``delivery.created`` gets that event too."""
    token = secrets.token_hex(16)
    lease_until = now + lease
    due = (select(WebhookAttempt.id)
           .where(WebhookAttempt.status == AttemptStatus.PENDING,
                  WebhookAttempt.next_attempt_at <= now,
                  WebhookAttempt.queued_behind.is_(None))
           .order_by(WebhookAttempt.next_attempt_at).limit(limit)
           .with_for_update(skip_locked=True))
    ids = session.execute(
        update(WebhookAttempt).where(WebhookAttempt.id.in_(due.scalar_subquery()))
        .values(next_attempt_at=lease_until, claim_token=token, updated_at=now)
        .returning(WebhookAttempt.id).execution_options(synchronize_session=False)
    ).scalars().all()
    if not ids:
        return []
    behind = aliased(WebhookAttempt)
    queued = exists().where(behind.queued_behind == WebhookAttempt.id)
    rows = session.execute(
        select(WebhookAttempt.id, WebhookAttempt.attempt_count, WebhookEvent.id,
               WebhookEvent.type, WebhookEvent.payload, WebhookEvent.delivery_id,
               queued.label("queued"),
               WebhookEvent.app_id, App.slug, App.runtime_status,
               App.runtime_domain_request_status, App.runtime_origin, WebhookEndpoint)
        .join(WebhookEvent, WebhookEvent.id == WebhookAttempt.event_id)
        .join(App, App.id == WebhookEvent.app_id)
        .outerjoin(WebhookEndpoint, WebhookEndpoint.app_id == WebhookEvent.app_id)
        .where(WebhookAttempt.id.in_(ids))
        .order_by(WebhookAttempt.next_attempt_at)).all()
    cache = {} if secret_cache is None else secret_cache
    jobs: list[Job] = []
    skipped: list[tuple[str, str]] = []
    waited_on: list[str] = []
    for (attempt_id, count, event_id, event_type, payload, delivery_id, has_queue, app_id,
         slug, runtime_status, domain_status, origin, endpoint) in rows:
        test = payload.get("test") is True
        reason = _nowhere(endpoint, event_type, test)
        if (event_type == "payment.delivered" and not test and count == 0
                and endpoint is not None and endpoint.status == EndpointStatus.ENABLED
                and LEGACY_TYPE in endpoint.events and delivery_id is not None):
            _add_legacy_event(session, app_id, delivery_id, payload, now)
        if reason is not None:
            skipped.append((attempt_id, reason))
            if has_queue:
                waited_on.append(attempt_id)
            continue
        assert endpoint is not None
        jobs.append(Job(attempt_id=attempt_id, claim_token=token, lease_until=lease_until,
                        number=count + 1, event_id=event_id, event_type=event_type,
                        payload=payload, delivery_id=delivery_id, queued=bool(has_queue),
                        app_slug=slug,
                        runtime_active=serves_runtime(runtime_status, domain_status, origin),
                        endpoint_id=endpoint.id, url=endpoint.url,
                        secret=_open_secret(box, endpoint, cache)))
    if skipped:
        session.execute(
            update(_ATTEMPTS)
            .where(_ATTEMPTS.c.id == bindparam("b_id"), _ATTEMPTS.c.claim_token == token)
            .values(status=AttemptStatus.SKIPPED, last_error=bindparam("b_error"),
                    next_attempt_at=now, updated_at=now, claim_token=None),
            [{"b_id": a, "b_error": r} for a, r in skipped])
        _release_queued(session, waited_on, now)
    return jobs


def _nowhere(endpoint: WebhookEndpoint | None, event_type: str, test: bool) -> str | None:
    if endpoint is None:
        return "no_endpoint"
    if endpoint.status != EndpointStatus.ENABLED:
        return DISABLED
    if not test and event_type not in endpoint.events:
        return "not_subscribed"
    return None


def _open_secret(box: SecretBox, endpoint: WebhookEndpoint,
                 cache: dict[tuple[str, str], str]) -> str | None:
    key = (endpoint.id, endpoint.secret_sealed)
    secret = cache.get(key)
    if secret is None:
        try:
            secret = box.open(endpoint.secret_sealed, endpoint.id)
        except SecretUnreadable:
            return None
        if len(cache) > 10_000:
            cache.clear()
        cache[key] = secret
    return secret


def legacy_twin(delivery_id: str) -> Select[str]:
    """The id of the delivery's ``delivery.created`` event, if written: found through
    ``ix_webhook_events_delivery_id`` (migration 0014), not a scan of every event."""
    return select(WebhookEvent.id).where(WebhookEvent.delivery_id == delivery_id,
                                         WebhookEvent.type == LEGACY_TYPE)


def _add_legacy_event(session: Session, app_id: str, delivery_id: str,
                      payload: dict[str, Any], now: datetime) -> None:
    """The legacy ``delivery.created`` twin of a delivery's ``payment.delivered`` (spec 6,
    9 item 4): its own event id, the same body otherwise. Only the dispatcher holding the
    first claim of the ``payment.delivered`` row writes it, and only once per delivery."""
    if session.scalar(legacy_twin(delivery_id)) is not None:
        return
    event_id = new_id(IdPrefix.EVENT)
    body = {**payload, "id": event_id, "type": LEGACY_TYPE}
    enqueue(session, app_id, LEGACY_TYPE, body, delivery_id, now)


def enqueue(session: Session, app_id: str, event_type: str, payload: dict[str, Any],
            delivery_id: str | None, now: datetime) -> WebhookAttempt:
    """An event and its pending attempt, due now, in the caller's transaction."""
    session.add(WebhookEvent(id=payload["id"], app_id=app_id, type=event_type,
                             delivery_id=delivery_id, payload=payload, created_at=now))
    session.flush()  # the attempt's foreign key needs the event row first
    attempt = WebhookAttempt(id=new_id(IdPrefix.WEBHOOK_ATTEMPT), event_id=payload["id"],
                             status=AttemptStatus.PENDING, attempt_count=0,
                             next_attempt_at=now, signed=False, updated_at=now)
    session.add(attempt)
    session.flush()
    return attempt


@dataclass(frozen=True)
class Finished:
    recorded: int  # outcomes recorded; the rest had their claim taken over
    released: int  # rows queued behind the answered ones, due now


def finish(session: Session, results: Iterable[Result], now: datetime) -> Finished:
    """Record outcomes of claimed attempts; rows whose claim was taken over are left alone.
    In the same transaction: deliveries whose fulfilment event got a 2xx become
    ``fulfilled``, and rows queued behind the answered attempts become due."""
    results = list(results)
    if not results:
        return Finished(0, 0)
    params = [{
        "b_id": r.job.attempt_id, "b_token": r.job.claim_token, "b_status": r.next.status,
        "b_count": r.job.number, "b_next": r.next.next_attempt_at,
        "b_response": r.outcome.status, "b_signed": r.signed, "b_error": r.outcome.error,
        "b_endpoint": r.job.endpoint_id,
        "b_delivered": r.sent_at if r.outcome.delivered else None, "b_now": now,
    } for r in results]
    recorded = cast(CursorResult[Any], session.execute(_FINISH, params)).rowcount
    session.execute(_INSERT_TRY, [{
        "attempt_id": r.job.attempt_id, "endpoint_id": r.job.endpoint_id,
        "number": r.job.number, "response_status": r.outcome.status, "error": r.outcome.error,
        "signed": r.signed, "duration_ms": r.duration_ms, "sent_at": r.sent_at,
    } for r in results])
    recorded = int(recorded or 0)
    accepted = {r.job.attempt_id: r.job.delivery_id for r in results if r.outcome.delivered
                and r.job.delivery_id and r.job.event_type in FULFILMENT_TYPES}
    if accepted:
        _mark_fulfilled(session, accepted, all_recorded=recorded == len(results))
    waited_on = [r.job.attempt_id for r in results if r.job.queued]
    return Finished(recorded, _release_queued(session, waited_on, now) if waited_on else 0)


def _mark_fulfilled(session: Session, accepted: Mapping[str, str | None], *,
                    all_recorded: bool) -> None:
    """``delivery.fulfilled``: the receiver answered 2xx to the delivery's fulfilment event
    (attempt id -> delivery id), which it does only after fulfilling (spec 3.7). When some
    outcome was not recorded (its claim was taken over), only deliveries whose attempt row
    is ``delivered`` now."""
    found = accepted.values() if all_recorded else session.scalars(
        select(WebhookEvent.delivery_id)
        .join(WebhookAttempt, WebhookAttempt.event_id == WebhookEvent.id)
        .where(WebhookAttempt.id.in_(list(accepted)),
               WebhookAttempt.status == AttemptStatus.DELIVERED)).all()
    ids = {d for d in found if d}
    if ids:
        session.execute(_FULFIL, {"b_ids": sorted(ids)})


def _release_queued(session: Session, attempt_ids: list[str], now: datetime) -> int:
    """Rows queued behind these attempts become due, where the attempt is no longer
    claimed (its outcome is recorded, or it was skipped); returns how many. Called only for
    attempts the claim saw rows queued behind: the common outcome costs no statement."""
    if not attempt_ids:
        return 0
    answered = select(WebhookAttempt.id).where(WebhookAttempt.id.in_(attempt_ids),
                                               WebhookAttempt.claim_token.is_(None))
    result = session.execute(
        update(WebhookAttempt).where(WebhookAttempt.queued_behind.in_(answered.scalar_subquery()))
        .values(queued_behind=None, next_attempt_at=now, updated_at=now)
        .execution_options(synchronize_session=False))
    return int(cast(CursorResult[Any], result).rowcount or 0)


def release(session: Session, jobs: Iterable[Job], now: datetime) -> None:
    """Give claims back unsent (a dispatcher stopping): due again at once, for anyone."""
    params = [{"b_id": j.attempt_id, "b_token": j.claim_token} for j in jobs]
    if params:
        session.execute(
            update(_ATTEMPTS)
            .where(_ATTEMPTS.c.id == bindparam("b_id"),
                   _ATTEMPTS.c.claim_token == bindparam("b_token"))
            .values(next_attempt_at=now, claim_token=None, updated_at=now), params)


def retry(session: Session, attempt: WebhookAttempt, now: datetime) -> None:
    """Manual retry: the same event, same id, due now (spec 6 item 5). It continues the
    count; an attempt that had used up the schedule gets this one request."""
    if attempt.claim_token is not None and attempt.next_attempt_at > now:
        raise ApiError("webhook_attempt_in_flight", 409, "This event is being sent right now; "
                       "look at its attempts again in a few seconds.")
    # WAKE: the commit hook (wakeup.py) wakes this process's dispatcher after the commit.
    session.execute(update(WebhookAttempt).where(WebhookAttempt.id == attempt.id)
                    .values(status=AttemptStatus.PENDING, next_attempt_at=now,
                            claim_token=None, queued_behind=None, updated_at=now)
                    .execution_options(synchronize_session=False, **WAKE))
    session.refresh(attempt)


def prune_tries(session: Session, before: datetime) -> int:
    """Retention: drop try records older than ``before`` (the events and their outbox rows
    stay with the ledger)."""
    result = session.execute(delete(WebhookTry).where(WebhookTry.sent_at < before))
    return int(cast(CursorResult[Any], result).rowcount or 0)
