"""``delivery.fulfilled`` (spec 2.1): true once the developer's receiver answered 2xx to the
delivery's fulfilment event, which it does only after fulfilling (spec 3.7, 6 rule 2).

Set in the transaction that records that answer; a failed request, a ``payment.settled``
answer or a test event leave it false. Webhook bodies are written before the answer, so the
``payment.delivered`` body itself says false; a lookup after it, and an event written after
it, say true."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select, update

from payments.chain.params import in_process_params
from payments.db import transaction, utcnow
from payments.ledger.charges import enqueue_event
from payments.ledger.models import AttemptStatus, Charge, Delivery, WebhookAttempt
from payments.models import App, Product
from payments.webhooks import outbox
from payments.webhooks.outbox import Job, Result
from payments.webhooks.schedule import Next, Outcome
from tests.ledger.flow import PayWorld
from tests.webhooks.kit import (
    FAIL,
    OK,
    FaultyReceiver,
    all_settled,
    attempts,
    console,
    create_endpoint,
    developer_of,
    pay,
    wait_until,
)


@pytest.fixture
def dev(world: PayWorld) -> Iterator[httpx.Client]:
    with console(world, developer_of(world)) as client:
        yield client


def looked_up(world: PayWorld, delivery_id: str) -> dict[str, Any]:
    """``GET /api/deliveries/<id>`` with the app's backend key."""
    with world.keyed() as backend:
        answer = backend.get(f"/api/deliveries/{delivery_id}")
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()["delivery"]
    return body


def settle_event(world: PayWorld, delivery_id: str) -> None:
    """The ``payment.settled`` event the settlement worker writes (no chain needed)."""
    with transaction(world.sessions) as session:
        delivery = session.get(Delivery, delivery_id)
        assert delivery is not None
        charge = session.get(Charge, delivery.charge_seq)
        app, product = session.get(App, delivery.app_id), session.get(Product,
                                                                       delivery.product_id)
        assert charge and app and product
        enqueue_event(session, "payment.settled", app, product, charge, delivery,
                      in_process_params(), utcnow())


def fulfilled_count(world: PayWorld) -> int:
    with world.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(Delivery).where(
            Delivery.fulfilled.is_(True))) or 0)


def test_fulfilled_once_the_receiver_accepts_payment_delivered(
        world: PayWorld, hook: FaultyReceiver, dev: httpx.Client) -> None:
    accept = False
    hook.plan = lambda n, event: OK if accept else FAIL
    _, hook.secret = create_endpoint(dev, "game", hook.url,
                                     ["payment.delivered", "payment.settled"])
    (delivery_id,) = pay(world, 1)
    assert looked_up(world, delivery_id)["fulfilled"] is False
    wait_until(lambda: len(hook.requests) >= 2, what="two refused requests")
    assert looked_up(world, delivery_id)["fulfilled"] is False  # 503: not fulfilled
    accept = True
    wait_until(all_settled(world.sessions), what="payment.delivered accepted")
    (attempt,) = attempts(world.sessions).values()
    assert attempt.status == AttemptStatus.DELIVERED
    assert looked_up(world, delivery_id)["fulfilled"] is True
    # The body was written with the charge, before any answer: it says false.
    accepted = [r for r in hook.requests if r.status == 200]
    assert json.loads(accepted[0].body)["delivery"]["fulfilled"] is False
    # An event written afterwards carries the delivery as it is then.
    settle_event(world, delivery_id)
    wait_until(lambda: any(r.headers["x-svc-event"] == "payment.settled" and r.status == 200
                           for r in hook.requests), what="payment.settled")
    settled = next(r for r in hook.requests if r.headers["x-svc-event"] == "payment.settled")
    assert json.loads(settled.body)["delivery"]["fulfilled"] is True


def test_a_settled_answer_or_a_test_event_does_not_fulfil(
        world: PayWorld, hook: FaultyReceiver, dev: httpx.Client) -> None:
    webhook, hook.secret = create_endpoint(dev, "game", hook.url, ["payment.settled"])
    (delivery_id,) = pay(world, 1)  # payment.delivered: not subscribed, skipped
    settle_event(world, delivery_id)
    queued = dev.post(f"/api/developer/apps/game/webhooks/{webhook['id']}/test")
    assert queued.status_code == 202
    wait_until(lambda: len(hook.delivered_ids()) == 2 and all_settled(world.sessions)(),
               what="payment.settled and the test event accepted")
    assert sorted(r.headers["x-svc-event"] for r in hook.requests) == [
        "payment.delivered", "payment.settled"]  # the first is the test event
    assert looked_up(world, delivery_id)["fulfilled"] is False
    assert fulfilled_count(world) == 0


def test_the_legacy_twin_accepted_fulfils_too(world: PayWorld, hook: FaultyReceiver,
                                              dev: httpx.Client) -> None:
    """A legacy subscription gets ``delivery.created`` only; its 2xx fulfils as well."""
    _, hook.secret = create_endpoint(dev, "game", hook.url, ["delivery.created"])
    (delivery_id,) = pay(world, 1)
    wait_until(lambda: len(hook.delivered_ids()) == 1 and all_settled(world.sessions)(),
               what="the legacy twin accepted")
    assert [r.headers["x-svc-event"] for r in hook.requests] == ["delivery.created"]
    assert looked_up(world, delivery_id)["fulfilled"] is True


def test_only_the_claim_holders_recorded_2xx_fulfils(world: PayWorld) -> None:
    """A late dispatcher whose claim was taken over records nothing, so it fulfils nothing;
    the holder's 2xx, recorded, does (``outbox.finish``)."""
    (delivery_id,) = pay(world, 1)  # no endpoint: the dispatcher skips it
    wait_until(all_settled(world.sessions), what="skipped")
    (row,) = attempts(world.sessions).values()
    now = utcnow()

    def finish(token: str) -> int:
        job = Job(attempt_id=row.id, claim_token=token, lease_until=now, number=1,
                  event_id=row.event_id, event_type="payment.delivered", payload={},
                  delivery_id=delivery_id, queued=False, app_slug="game",
                  runtime_active=False, endpoint_id="zwh_x", url="https://x.example/h",
                  secret=None)
        result = Result(job, Outcome(200), Next(AttemptStatus.DELIVERED, now), now, 1, True)
        with transaction(world.sessions) as session:
            return outbox.finish(session, [result], now).recorded

    with transaction(world.sessions) as session:  # as a claim would: token and lease
        session.execute(update(WebhookAttempt).where(WebhookAttempt.id == row.id).values(
            status=AttemptStatus.PENDING, claim_token="holder",
            next_attempt_at=now + timedelta(hours=1)))
    assert finish("taken-over") == 0
    assert looked_up(world, delivery_id)["fulfilled"] is False
    assert finish("holder") == 1
    assert looked_up(world, delivery_id)["fulfilled"] is True
