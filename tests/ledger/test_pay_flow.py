"""The hosted-entry payment path end to end through the real router."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from payments.ledger.models import Charge, Delivery, WebhookAttempt, WebhookEvent
from tests.ledger.flow import PARAMS, PayWorld, build_world, wallet
from tests.support.router import RouterFactory


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[PayWorld]:
    with start_router() as router:
        yield build_world(router, sessions)


def test_authorize_exchange_pay(world: PayWorld) -> None:
    user = wallet(1)
    returned = world.authorize(user, 1_000_000)
    assert returned["redirectUrl"].startswith(f"{world.portal}/game?code=sum_")
    summary_code = returned["code"]
    with world.api(origin=world.audience) as api:
        summary = api.get("/api/authorizations/summary", params={"code": summary_code})
        assert summary.headers["access-control-allow-origin"] == world.audience
        assert summary.json()["remaining"] == "1000000"
        assert summary.json()["ownerWallet"] == user.address.lower()
        assert summary.json()["spender"] == PARAMS.spender.lower()
    code = world.payment_code(summary_code, "retry")
    with world.api(origin=world.audience) as api:
        paid = world.pay(api, user, "retry", code, "game:retry:1")
        assert paid.status_code == 201, paid.text
        body = paid.json()
        assert body["status"] == "delivered"
        assert body["chargeId"].startswith("0x") and len(body["chargeId"]) == 66
        assert body["deliveryId"].startswith("ztdlv_")
        assert body["idempotencyKey"] == "svc:game:retry:1"
        assert body["remaining"] == str(1_000_000 - 10_000)
        again = world.pay(api, user, "retry", code, "game:retry:1")
        assert again.status_code == 201
        assert again.json() == body  # same key, same request: the same answer
        reused = world.pay(api, user, "retry", code, "game:retry:2")
        assert reused.status_code == 409
        assert reused.json()["code"] == "AUTHORIZATION_CODE_CONSUMED"
    with world.keyed() as backend:
        delivery = backend.get(f"/api/deliveries/{body['deliveryId']}").json()["delivery"]
        assert delivery["chargeId"] == body["chargeId"]
        assert delivery["status"] == "delivered"
        receipt = backend.get(f"/api/receipts/{body['chargeId']}").json()["receipt"]
        assert receipt["amountAtomic"] == "10000"
        assert receipt["settlementStatus"] == "queued"
    with world.sessions() as session:
        assert session.scalar(select(func.count()).select_from(Charge)) == 1
        assert session.scalar(select(func.count()).select_from(Delivery)) == 1
        event = session.scalars(select(WebhookEvent)).one()
        assert event.type == "payment.delivered"
        assert event.payload["delivery"]["deliveryId"] == body["deliveryId"]
        attempt = session.scalars(select(WebhookAttempt)).one()
        assert (attempt.status.value, attempt.attempt_count, attempt.signed,
                attempt.response_status, attempt.event_id) == ("pending", 0, False, None,
                                                               event.id)
        # The hot path writes these rows with Core statements: every column as the model
        # would have written it.
        charge = session.scalars(select(Charge)).one()
        assert (charge.settlement_status.value, charge.batch_id, charge.settlement_tx_hash,
                charge.source, charge.amount_atomic, charge.owner_wallet, charge.settled_at) == (
            "queued", None, None, "product_route", 10_000, user.address.lower(), None)
        row = session.scalars(select(Delivery)).one()
        assert (row.id, row.charge_seq, row.status.value, row.fulfilled, row.wallet_address,
                row.developer_user_id, row.delivered_at is not None) == (
            body["deliveryId"], charge.seq, "delivered", False, user.address.lower(),
            "user-1", True)
        assert event.delivery_id == row.id and event.id.startswith("zevt_")
        assert attempt.id.startswith("zwha_")


def test_payment_code_needs_the_summary_origin(world: PayWorld) -> None:
    summary_code = world.authorize(wallet(2), 100_000)["code"]
    body = {"authorizationCode": summary_code, "paymentUrl": world.payment_url("retry"),
            "developerUserId": "u"}
    with world.api() as api:
        missing = api.post("/api/authorizations/payment-code", json=body)
        assert missing.status_code == 403
        assert missing.json()["code"] == "PAYMENT_CODE_ORIGIN_REQUIRED"
    with world.api(origin="https://evil.example") as api:
        other = api.post("/api/authorizations/payment-code", json=body)
        assert other.status_code == 403
        assert other.json()["code"] == "PAYMENT_CODE_ORIGIN_MISMATCH"
        assert "access-control-allow-origin" not in other.headers
