"""A product-route retry after a lost answer (spec 4.1, docs/payments.md "Idempotency"): the
client's payment code was consumed by the call it never heard back from, so its retry under
the same idempotency key carries a freshly exchanged code. The same purchase is answered
from the store and charged once; another purchase under that key is refused, charging
nothing (SQLite and PostgreSQL, with real parallel clients for the race)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction, utcnow
from payments.developer.tokens import token_hash
from payments.ledger.models import (
    AuthCode,
    Authorization,
    Charge,
    CodeKind,
    Delivery,
    WebhookEvent,
)
from tests.ledger.flow import PayWorld, build_world, connect, start_handoff, wallet
from tests.ledger.parallel import run_parallel
from tests.support.router import RouterFactory

PRICE = 10_000  # the ``retry`` template
KEY = "game:retry:lost-answer"


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[PayWorld]:
    with start_router() as router:
        yield build_world(router, sessions)


def count(world: PayWorld, model: type) -> int:
    with world.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


def spent(world: PayWorld) -> dict[str, int]:
    with world.sessions() as session:
        return {a.owner_wallet: a.spent_atomic for a in session.scalars(select(Authorization))}


def consumed(world: PayWorld, code: str) -> bool:
    with world.sessions() as session:
        record = session.scalars(select(AuthCode).where(
            AuthCode.code_hash == token_hash(code))).one()
        return record.consumed_at is not None


def ledger(world: PayWorld) -> tuple[int, int, int, dict[str, int]]:
    return (count(world, Charge), count(world, Delivery), count(world, WebhookEvent),
            spent(world))


def refused(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["code"] == code and response.json()["message"]


def paid_once(world: PayWorld, **exchange: Any) -> tuple[str, dict[str, Any]]:
    """Authorize wallet 1, pay ``retry`` under KEY; the summary code and the 201 body."""
    summary = world.authorize(wallet(1), 10 * PRICE)["code"]
    code = world.payment_code(summary, "retry", idempotencyKey=KEY, **exchange)
    with world.api(origin=world.audience) as api:
        first = world.pay(api, wallet(1), "retry", code, KEY)
    assert first.status_code == 201, first.text
    assert consumed(world, code)
    body: dict[str, Any] = first.json()
    return summary, body


def test_a_retry_with_a_fresh_code_replays_the_stored_answer(world: PayWorld) -> None:
    summary, first = paid_once(world)
    before = ledger(world)
    # The answer was lost: the client exchanges the summary code again (the old code is
    # consumed) and retries with the same key. With the key bound into the exchange, as
    # the modal script does, and without it, as a hand-written client may.
    bound = world.payment_code(summary, "retry", idempotencyKey=KEY)
    unbound = world.payment_code(summary, "retry")
    with world.api(origin=world.audience) as api:
        for fresh in (bound, unbound):
            again = world.pay(api, wallet(1), "retry", fresh, KEY)
            assert again.status_code == 201, again.text
            assert again.json() == first  # the same charge and delivery, not a new one
            assert again.headers["access-control-allow-origin"] == world.audience
            # The replay did not spend the fresh code: single use is about paying.
            assert not consumed(world, fresh)
    assert ledger(world) == before == (1, 1, 1, {wallet(1).address.lower(): PRICE})
    # The fresh code still pays once, under a key of its own (the unbound one can).
    with world.api() as api:
        new = world.pay(api, wallet(1), "retry", unbound, "game:retry:next")
    assert new.status_code == 201 and new.json()["chargeId"] != first["chargeId"]
    assert count(world, Charge) == 2


def test_a_retry_of_an_order_payment_with_a_fresh_code_replays(world: PayWorld) -> None:
    with world.keyed() as backend:
        order_id = backend.post("/api/orders", json={
            "productId": world.products["retry"].id, "developerUserId": "user-1",
            "idempotencyKey": "order:1"}).json()["order"]["id"]
    summary = world.authorize(wallet(1), 10 * PRICE)["code"]
    code = world.payment_code(summary, "retry", orderId=order_id)
    with world.api() as api:
        # The user is left out on the wire: the order's user is who the purchase is for.
        first = world.pay(api, wallet(1), "retry", code, KEY, orderId=order_id,
                          developerUserId=None)
        assert first.status_code == 201, first.text
    # A paid order gets a payment code only for the key it was paid under: that code can
    # only find the payment's answer again.
    with world.api(origin=world.audience) as api:
        for other in ({}, {"idempotencyKey": "game:retry:another"}):
            refused(api.post("/api/authorizations/payment-code", json={
                "authorizationCode": summary, "paymentUrl": world.payment_url("retry"),
                "orderId": order_id, **other}), 409, "AUTHORIZATION_CODE_INTENT_MISMATCH")
    fresh = world.payment_code(summary, "retry", orderId=order_id, idempotencyKey=KEY)
    with world.api() as api:
        again = world.pay(api, wallet(1), "retry", fresh, KEY, orderId=order_id)
    # Not ORDER_ALREADY_PAID: it is this payment of the order, answered again.
    assert again.status_code == 201, again.text
    assert again.json() == first.json() and again.json()["orderId"] == order_id
    assert count(world, Charge) == 1


def test_an_expired_fresh_code_for_the_same_purchase_still_replays(world: PayWorld) -> None:
    summary, first = paid_once(world)
    fresh = world.payment_code(summary, "retry", idempotencyKey=KEY)
    with transaction(world.sessions) as session:
        session.execute(update(AuthCode).where(AuthCode.kind == CodeKind.PAYMENT).values(
            expires_at=utcnow() - timedelta(seconds=1)))
    with world.api() as api:
        again = world.pay(api, wallet(1), "retry", fresh, KEY)
    assert again.status_code == 201 and again.json() == first
    assert count(world, Charge) == 1


def test_another_purchase_under_the_same_key_is_refused_and_charges_nothing(
        world: PayWorld) -> None:
    summary, _ = paid_once(world)
    other_summary = world.authorize(wallet(2), 10 * PRICE)["code"]
    before = ledger(world)
    for_product = world.payment_code(summary, "unlock-level")
    for_user = world.payment_code(summary, "retry", developerUserId="user-2")
    for_wallet = world.payment_code(other_summary, "retry")
    with world.api() as api:
        # Another product: its own route, its own code.
        refused(world.pay(api, wallet(1), "unlock-level", for_product, KEY), 409,
                "IDEMPOTENCY_KEY_REUSED")
        # Another developer-side user.
        refused(world.pay(api, wallet(1), "retry", for_user, KEY, developerUserId="user-2"),
                409, "IDEMPOTENCY_KEY_REUSED")
        # Another wallet's budget.
        refused(world.pay(api, wallet(2), "retry", for_wallet, KEY), 409,
                "IDEMPOTENCY_KEY_REUSED")
        # A code that does not bind this route's product is the code's error, as always.
        refused(world.pay(api, wallet(1), "retry", for_product, KEY), 409,
                "AUTHORIZATION_CODE_INTENT_MISMATCH")
        # A code the service never issued binds nothing it could compare.
        refused(world.pay(api, wallet(1), "retry", "pay_" + "0" * 48, KEY), 401,
                "AUTHORIZATION_CODE_INVALID")
    assert ledger(world) == before
    for code in (for_product, for_user, for_wallet):
        assert not consumed(world, code)  # refused, so still usable under a key of its own
    with world.api() as api:
        assert world.pay(api, wallet(2), "retry", for_wallet, "game:retry:w2").status_code == 201


def test_a_retry_on_another_account_connection_is_refused(world: PayWorld) -> None:
    """The connection is part of what was bought: a code derived for another game account
    (same wallet) is another purchase."""
    connect(world, wallet(1), "ada", 10 * PRICE)
    bob = connect(world, wallet(1), "bob", 10 * PRICE, nonce=1)["summary"]["authorizationCode"]
    # Bob's permit superseded the budget Ada's return had: her ready handoff gives a summary
    # code of the current budget, on her connection.
    ready = start_handoff(world, "ada").json()
    assert ready["status"] == "ready", ready
    ada = ready["authorization"]["authorizationCode"]
    code = world.payment_code(ada, "retry")
    with world.api() as api:
        first = world.pay(api, wallet(1), "retry", code, KEY)
        assert first.status_code == 201, first.text
        same = world.pay(api, wallet(1), "retry",
                         world.payment_code(ada, "retry"), KEY)
        assert same.status_code == 201 and same.json() == first.json()
        refused(world.pay(api, wallet(1), "retry",
                          world.payment_code(bob, "retry"), KEY),
                409, "IDEMPOTENCY_KEY_REUSED")
    assert count(world, Charge) == 1


def test_one_key_two_fresh_codes_at_once_is_one_charge(world: PayWorld) -> None:
    """The first call's answer is lost and the client retries while it is still running
    (or two tabs finish one pending purchase): two live codes, one key, at once."""
    summary = world.authorize(wallet(1), 10 * PRICE)["code"]
    codes = [world.payment_code(summary, "retry", idempotencyKey=KEY) for _ in range(8)]
    jobs = [lambda client, c=code: world.pay(client, wallet(1), "retry", c, KEY)
            for code in codes]
    responses = run_parallel(world, jobs, workers=len(jobs), origin=world.audience)
    assert Counter(r.status_code for r in responses) == {201: len(jobs)}, [
        r.text for r in responses]
    bodies = [r.json() for r in responses]
    assert all(body == bodies[0] for body in bodies)
    assert ledger(world) == (1, 1, 1, {wallet(1).address.lower(): PRICE})
    # One code paid; the others only found its answer and stay unused.
    assert sorted(consumed(world, code) for code in codes) == [False] * 7 + [True]


def test_one_order_one_key_fresh_codes_at_once_is_one_charge(world: PayWorld) -> None:
    """As above for an order's payment. On PostgreSQL the later calls waited for the
    order's row lock, then found it paid: ORDER_ALREADY_PAID (409) instead of the winner's
    answer, which a client reads as not paid (review of 2026-11-27, finding 1)."""
    with world.keyed() as backend:
        order_id = backend.post("/api/orders", json={
            "productId": world.products["retry"].id, "developerUserId": "user-1",
            "idempotencyKey": "order:race"}).json()["order"]["id"]
    summary = world.authorize(wallet(1), 10 * PRICE)["code"]
    codes = [world.payment_code(summary, "retry", orderId=order_id, idempotencyKey=KEY)
             for _ in range(8)]
    jobs = [lambda client, c=code: world.pay(client, wallet(1), "retry", c, KEY,
                                             orderId=order_id) for code in codes]
    responses = run_parallel(world, jobs, workers=len(jobs), origin=world.audience)
    assert Counter(r.status_code for r in responses) == {201: len(jobs)}, [
        r.text for r in responses if r.status_code != 201]
    bodies = [r.json() for r in responses]
    assert all(body == bodies[0] for body in bodies)
    assert ledger(world) == (1, 1, 1, {wallet(1).address.lower(): PRICE})
    assert sorted(consumed(world, code) for code in codes) == [False] * 7 + [True]
