"""An app that may not be paid (spec 7, "product route rejects the app"): no ``pay_to``, an
invalid one, a recipient not on the spender contract's allowlist, or payments stopped
(kill switch, suspended). ``POST /api/pay/<app>/<product>`` and ``POST /api/charges``
refuse it with 403 and the spec's envelope, and write nothing that moves or promises money:
no charge, delivery, webhook event or outbox row, no budget spent, no stored answer, and
the payment code is not used up, so the same code and key pay once the app is fixed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction
from payments.ledger.models import (
    AuthCode,
    Authorization,
    Charge,
    CodeKind,
    Delivery,
    IdempotencyRecord,
    WebhookAttempt,
    WebhookEvent,
)
from payments.models import AllowlistStatus, App, AppStatus
from tests.ledger.flow import PAY_TO, PayWorld, add_product, build_world, connect, wallet
from tests.support.router import RouterFactory

TRUSTED = {"trustedServerCharge": {"enabled": True, "maxAmountAtomic": "20000"}}
PAYABLE: dict[str, Any] = {"pay_to": PAY_TO, "status": AppStatus.ACTIVE, "kill_switch": False,
                           "recipient_allowlist_status": AllowlistStatus.ALLOWED}
# What is wrong with the app -> the refusal's code (payments.ledger.charges.check_payable).
UNPAYABLE: dict[str, tuple[dict[str, Any], str]] = {
    "no-pay-to": ({"pay_to": None}, "APP_PAY_TO_INVALID"),
    "empty-pay-to": ({"pay_to": ""}, "APP_PAY_TO_INVALID"),
    "short-pay-to": ({"pay_to": "0x1234"}, "APP_PAY_TO_INVALID"),
    "non-hex-pay-to": ({"pay_to": "0x" + "zz" * 20}, "APP_PAY_TO_INVALID"),
    "allowlist-unknown": ({"recipient_allowlist_status": AllowlistStatus.UNKNOWN},
                          "RECIPIENT_NOT_ALLOWLISTED"),
    "not-allowlisted": ({"recipient_allowlist_status": AllowlistStatus.NOT_ALLOWED},
                        "RECIPIENT_NOT_ALLOWLISTED"),
    "kill-switch": ({"kill_switch": True}, "APP_UNAVAILABLE"),
    "suspended": ({"status": AppStatus.SUSPENDED}, "APP_UNAVAILABLE"),
}


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[PayWorld]:
    with start_router() as router:
        world = build_world(router, sessions)
        add_product(world, {"slug": "boost", "name": "Boost", "priceAtomic": "10000",
                            "riskPolicy": TRUSTED})
        yield world


def set_app(world: PayWorld, values: dict[str, Any]) -> None:
    with transaction(world.sessions) as session:
        session.execute(update(App).where(App.id == world.app.id).values(**values))


def written(world: PayWorld) -> dict[str, Any]:
    """Everything a payment writes or uses up."""
    def count(model: type) -> int:
        with world.sessions() as session:
            return int(session.scalar(select(func.count()).select_from(model)) or 0)
    with world.sessions() as session:
        spent = list(session.scalars(select(Authorization.spent_atomic)
                                     .order_by(Authorization.id)))
        used = session.scalar(select(func.count()).select_from(AuthCode).where(
            AuthCode.kind == CodeKind.PAYMENT, AuthCode.consumed_at.is_not(None)))
    return {"charges": count(Charge), "deliveries": count(Delivery),
            "events": count(WebhookEvent), "attempts": count(WebhookAttempt),
            "answers": count(IdempotencyRecord), "spent": spent, "used codes": used}


def assert_refused(response: httpx.Response, code: str) -> None:
    assert response.status_code == 403, response.text
    body = response.json()
    assert body["code"] == code and isinstance(body["message"], str) and body["message"]


@pytest.mark.parametrize("case", list(UNPAYABLE))
def test_the_product_route_refuses_the_app_and_uses_nothing_up(world: PayWorld,
                                                              case: str) -> None:
    broken, code = UNPAYABLE[case]
    user = wallet(1)
    summary = world.authorize(user, 1_000_000)["code"]
    payment_code = world.payment_code(summary, "retry")  # issued while the app was payable
    before = written(world)
    set_app(world, broken)
    with world.api(origin=world.audience) as api:
        assert_refused(world.pay(api, user, "retry", payment_code, "game:retry:1"), code)
        assert written(world) == before
        set_app(world, PAYABLE)  # the developer (or the operator) fixes the app
        paid = world.pay(api, user, "retry", payment_code, "game:retry:1")
    assert paid.status_code == 201, paid.text
    after = written(world)
    assert (after["charges"], after["deliveries"], after["events"], after["used codes"]) == (
        1, 1, 1, before["used codes"] + 1)


@pytest.mark.parametrize("case", list(UNPAYABLE))
def test_a_trusted_charge_refuses_the_app_and_writes_nothing(world: PayWorld,
                                                            case: str) -> None:
    broken, code = UNPAYABLE[case]
    connection = connect(world, wallet(1), "user-1", 100_000)["summary"]["accountConnectionId"]
    body = {"productId": world.products["boost"].id, "accountConnectionId": connection,
            "idempotencyKey": "game:boost:1", "developerUserId": "user-1"}
    before = written(world)
    set_app(world, broken)
    with world.keyed() as backend:
        assert_refused(backend.post("/api/charges", json=body), code)
        assert written(world) == before
        set_app(world, PAYABLE)
        paid = backend.post("/api/charges", json=body)  # the key was not taken
    assert paid.status_code == 201, paid.text
    assert written(world)["charges"] == 1
