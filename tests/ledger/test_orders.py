"""Backend-created orders (spec 4.2, 1.3 path 2): fixed and dynamic amounts, idempotent
creation, order-bound payment codes, and an order that can be paid only once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from payments.ledger.models import Charge, IdempotencyRecord, Order, WebhookEvent
from payments.models import Product
from payments.products import TIP_MAX_ATOMIC, TIP_MIN_ATOMIC
from tests.ledger.flow import PayWorld, build_world, wallet
from tests.support.router import RouterFactory


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[PayWorld]:
    with start_router() as router:
        yield build_world(router, sessions)


def create(world: PayWorld, product: str, key: str, **extra: Any) -> httpx.Response:
    with world.keyed() as backend:
        return backend.post("/api/orders", json={
            "productId": world.products[product].id, "developerUserId": "user-1",
            "idempotencyKey": key, **extra})


def refused(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["code"] == code


def count(world: PayWorld, model: type) -> int:
    with world.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


def test_fixed_and_dynamic_orders(world: PayWorld) -> None:
    fixed = create(world, "retry", "o:1")
    assert fixed.status_code == 201, fixed.text
    order, product = fixed.json()["order"], fixed.json()["product"]
    assert order["id"].startswith("zord_") and order["status"] == "created"
    assert order["amountAtomic"] == "10000"
    assert product["paymentUrl"] == world.payment_url("retry")
    assert create(world, "retry", "o:2", amountAtomic="10000").status_code == 201
    refused(create(world, "retry", "o:3", amountAtomic="20000"), 422, "invalid_amount")

    tip = create(world, "tip", "o:4", amountAtomic="250000")
    assert tip.status_code == 201, tip.text
    assert tip.json()["order"]["amountAtomic"] == "250000"
    assert tip.json()["product"]["paymentUrl"] == world.payment_url("tip")
    assert create(world, "tip", "o:5", amountAtomic=TIP_MIN_ATOMIC).status_code == 201
    assert create(world, "tip", "o:6", amountAtomic=str(TIP_MAX_ATOMIC)).status_code == 201
    refused(create(world, "tip", "o:7", amountAtomic=TIP_MIN_ATOMIC - 1), 422, "invalid_amount")
    refused(create(world, "tip", "o:8", amountAtomic=TIP_MAX_ATOMIC + 1), 422, "invalid_amount")
    refused(create(world, "tip", "o:9"), 422, "missing_field")
    assert count(world, Order) == 5

    with world.keyed() as backend:
        read = backend.get(f"/api/orders/{order['id']}")
    assert read.status_code == 200
    assert read.json()["order"]["status"] == "created"
    assert read.json()["order"]["chargeId"] is None


def test_an_order_for_a_product_without_a_maximum(world: PayWorld) -> None:
    with world.sessions() as session, session.begin():
        tip = session.get(Product, world.products["tip"].id)
        assert tip is not None
        tip.max_amount_atomic = None
    low = create(world, "tip", "o:low", amountAtomic=str(TIP_MIN_ATOMIC - 1))
    refused(low, 422, "invalid_amount")
    assert low.json()["message"] == (f"amountAtomic must be at least {TIP_MIN_ATOMIC} (this "
                                     "product sets no maximum).")
    assert create(world, "tip", "o:high", amountAtomic=str(TIP_MAX_ATOMIC * 10)).status_code == 201


def test_order_creation_is_idempotent(world: PayWorld) -> None:
    first = create(world, "tip", "o:1", amountAtomic="50000")
    again = create(world, "tip", "o:1", amountAtomic="50000")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    refused(create(world, "tip", "o:1", amountAtomic="60000"), 409, "IDEMPOTENCY_KEY_REUSED")
    assert count(world, Order) == 1


def test_an_order_key_reused_after_its_answer_expired_is_refused(world: PayWorld) -> None:
    """The stored answer lives 30 days; the order keeps its key for good. A late reuse was
    a 500 (the unique index hit again on the retry); it is the reuse it is."""
    first = create(world, "tip", "o:late", amountAtomic="50000")
    assert first.status_code == 201, first.text
    with world.sessions() as session, session.begin():  # as the purge does, 30 days on
        session.execute(delete(IdempotencyRecord))
    for amount in ("50000", "60000"):  # the same request as then, or another
        refused(create(world, "tip", "o:late", amountAtomic=amount), 409,
                "IDEMPOTENCY_KEY_REUSED")
    assert count(world, Order) == 1


def test_order_bound_code_pays_the_order_once(world: PayWorld) -> None:
    user = wallet(1)
    order = create(world, "tip", "o:1", amountAtomic="250000").json()["order"]
    summary = world.authorize(user, 1_000_000)["code"]
    code = world.payment_code(summary, "tip", orderId=order["id"])
    spare = world.payment_code(summary, "tip", orderId=order["id"])
    with world.api() as api:
        # The code is bound to the order: without it, or with another, it is refused.
        refused(world.pay(api, user, "tip", code, "k:0"), 409,
                "AUTHORIZATION_CODE_INTENT_MISMATCH")
        refused(world.pay(api, user, "tip", code, "k:0", orderId="zord_other"), 409,
                "AUTHORIZATION_CODE_INTENT_MISMATCH")
        paid = world.pay(api, user, "tip", code, "k:1", orderId=order["id"])
        assert paid.status_code == 201, paid.text
        assert paid.json()["orderId"] == order["id"]
        assert paid.json()["amountAtomic"] == "250000"
        assert paid.json()["remaining"] == "750000"
        # Paying the order twice: a code taken before payment is refused at the route ...
        refused(world.pay(api, user, "tip", spare, "k:2", orderId=order["id"]), 409,
                "ORDER_ALREADY_PAID")
    # ... and no new code is issued for a paid order.
    with world.api(origin=world.audience) as api:
        refused(api.post("/api/authorizations/payment-code", json={
            "authorizationCode": summary, "paymentUrl": world.payment_url("tip"),
            "orderId": order["id"]}), 409, "AUTHORIZATION_CODE_INTENT_MISMATCH")
    with world.keyed() as backend:
        view = backend.get(f"/api/orders/{order['id']}").json()["order"]
        delivery = backend.get(f"/api/deliveries/{paid.json()['deliveryId']}").json()["delivery"]
    assert view["status"] == "paid" and view["paidAt"]
    assert view["chargeId"] == paid.json()["chargeId"]
    assert delivery["orderId"] == order["id"]
    assert count(world, Charge) == 1
    with world.sessions() as session:
        event = session.scalars(select(WebhookEvent)).one()
        assert event.payload["delivery"]["orderId"] == order["id"]


def test_order_and_product_must_agree(world: PayWorld) -> None:
    user = wallet(1)
    order = create(world, "tip", "o:1", amountAtomic="50000").json()["order"]
    summary = world.authorize(user, 1_000_000)["code"]
    with world.api(origin=world.audience) as api:
        refused(api.post("/api/authorizations/payment-code", json={
            "authorizationCode": summary, "paymentUrl": world.payment_url("retry"),
            "orderId": order["id"]}), 409, "AUTHORIZATION_CODE_INTENT_MISMATCH")
    # A dynamically priced product is paid only through an order.
    plain = world.payment_code(summary, "tip")
    with world.api() as api:
        refused(world.pay(api, user, "tip", plain, "k:1"), 409, "ORDER_REQUIRED")
        # Refused, not consumed: the same code gets the same answer, not CONSUMED.
        refused(world.pay(api, user, "tip", plain, "k:2"), 409, "ORDER_REQUIRED")
    assert count(world, Charge) == 0
