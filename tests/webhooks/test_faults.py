"""A receiver that fails a chosen share of requests (503), hangs past the timeout or closes
the connection without answering: every event still arrives, under its own id, and the
reference receiver grants each payment once."""

from __future__ import annotations

import random
from collections import Counter

from tests.ledger.flow import PayWorld
from tests.webhooks.kit import (
    CLOSE,
    FAIL,
    HANG,
    OK,
    all_settled,
    attempts,
    console,
    create_endpoint,
    developer_of,
    pay,
    receiver,
    wait_until,
)

PAYMENTS = 24


def test_every_event_arrives_once_granted_despite_faults(world: PayWorld) -> None:
    rng = random.Random(5)
    faults: Counter[str] = Counter()

    def plan(n: int, event_id: str) -> str:
        # Every event's first request fails, one way or other; later ones fail at random,
        # at most four in all per event: the schedule holds eight requests, and an event
        # that used them all up would be a test of the dice, not of the service.
        if not faults[event_id]:
            action = (FAIL, HANG, CLOSE)[n % 3]
        elif faults[event_id] >= 4:
            action = OK
        else:
            action = rng.choices((OK, FAIL, HANG, CLOSE), weights=(60, 20, 10, 10))[0]
        if action != OK:
            faults[event_id] += 1
        return action

    with receiver(plan, hang_seconds=1.5) as hook, \
            console(world, developer_of(world)) as client:
        _, hook.secret = create_endpoint(client, world.app.slug, hook.url)
        deliveries = pay(world, PAYMENTS)
        wait_until(all_settled(world.sessions), timeout=60, what="every attempt finished")
        rows = attempts(world.sessions)
        assert {a.status.value for a in rows.values()} == {"delivered"}, Counter(
            a.last_error for a in rows.values())
        # Same event id on every request of an event; every event got an OK.
        by_event = Counter(r.event_id for r in hook.requests)
        assert set(by_event) == set(rows) == hook.delivered_ids()
        # The service made at least two requests per event; the receiver may not have seen
        # a hung first one that the service had already given up on (a loaded box).
        assert all(rows[e].attempt_count >= 2 for e in rows)
        # Retries happened, 522 recorded for hangs and closes on the way.
        actions = Counter(r.action for r in hook.requests)
        assert actions[FAIL] and actions[HANG] and actions[CLOSE]
        # Granted exactly once per payment, whatever arrived twice.
        grants = hook.ledger.grants()
        assert sorted(d for _, d in grants) == sorted(deliveries)
        assert len({k for k, _ in grants}) == PAYMENTS
        # The try log: every request, with 522 for the ones that never got an answer.
        with world.sessions() as session:
            from sqlalchemy import select

            from payments.webhooks.models import WebhookTry
            tries = session.scalars(select(WebhookTry)).all()
        statuses = Counter(t.response_status for t in tries)
        assert statuses[522] >= actions[HANG] // 2 and statuses[503] == actions[FAIL]
        errors = {t.error for t in tries if t.response_status == 522}
        assert errors <= {"timeout", "disconnected", "request_failed", "connect_failed"}
        assert "timeout" in errors
