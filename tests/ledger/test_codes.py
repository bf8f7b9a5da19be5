"""Summary and payment codes (spec 3.6, 7): expiry, intent binding, connection binding,
the wallet/spender headers, and that a refused payment leaves the code usable."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction, utcnow
from payments.ledger.models import AuthCode, Charge, CodeKind
from tests.ledger.flow import PARAMS, PayWorld, build_world, connect, wallet
from tests.support.router import RouterFactory


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[PayWorld]:
    with start_router() as router:
        yield build_world(router, sessions)


def expire(world: PayWorld, kind: CodeKind) -> None:
    with transaction(world.sessions) as session:
        session.execute(update(AuthCode).where(AuthCode.kind == kind).values(
            expires_at=utcnow() - timedelta(seconds=1)))


def charges(world: PayWorld) -> int:
    with world.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(Charge)) or 0)


def refused(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code and body["message"]


def test_expired_summary_code(world: PayWorld) -> None:
    summary = world.authorize(wallet(1), 100_000)["code"]
    expire(world, CodeKind.SUMMARY)
    with world.api(origin=world.audience) as api:
        refused(api.get("/api/authorizations/summary", params={"code": summary}), 410,
                "AUTHORIZATION_CODE_EXPIRED")
        refused(api.post("/api/authorizations/payment-code", json={
            "authorizationCode": summary, "paymentUrl": world.payment_url("retry")}), 410,
            "AUTHORIZATION_CODE_EXPIRED")


def test_expired_payment_code_is_refused_and_charges_nothing(world: PayWorld) -> None:
    user = wallet(1)
    summary = world.authorize(user, 100_000)["code"]
    code = world.payment_code(summary, "retry")
    expire(world, CodeKind.PAYMENT)
    with world.api() as api:
        refused(world.pay(api, user, "retry", code, "k:1"), 410, "AUTHORIZATION_CODE_EXPIRED")
        refused(world.pay(api, user, "retry", code, "k:2"), 410, "AUTHORIZATION_CODE_EXPIRED")
        assert charges(world) == 0
        # The summary is still live: a fresh payment code pays.
        fresh = world.payment_code(summary, "retry")
        assert world.pay(api, user, "retry", fresh, "k:3").status_code == 201


def test_code_for_one_product_refused_on_another_and_still_usable(world: PayWorld) -> None:
    user = wallet(1)
    code = world.payment_code(world.authorize(user, 100_000)["code"], "retry")
    with world.api() as api:
        refused(world.pay(api, user, "unlock-level", code, "k:1"), 409,
                "AUTHORIZATION_CODE_INTENT_MISMATCH")
        refused(world.pay(api, user, "legendary", code, "k:2"), 409,
                "AUTHORIZATION_CODE_INTENT_MISMATCH")
        assert charges(world) == 0
        paid = world.pay(api, user, "retry", code, "k:3")
        assert paid.status_code == 201, paid.text
        # Consumed now: even the right product is refused, and the wrong one says so too.
        refused(world.pay(api, user, "retry", code, "k:4"), 409, "AUTHORIZATION_CODE_CONSUMED")
    assert charges(world) == 1


def test_code_bound_to_an_idempotency_key(world: PayWorld) -> None:
    user = wallet(1)
    summary = world.authorize(user, 100_000)["code"]
    code = world.payment_code(summary, "retry", idempotencyKey="game:retry:abc")
    with world.api() as api:
        refused(world.pay(api, user, "retry", code, "game:retry:other"), 409,
                "AUTHORIZATION_CODE_INTENT_MISMATCH")
        assert world.pay(api, user, "retry", code, "game:retry:abc").status_code == 201


def test_wallet_and_spender_headers_must_match_the_code(world: PayWorld) -> None:
    user, stranger = wallet(1), wallet(2)
    code = world.payment_code(world.authorize(user, 100_000)["code"], "retry")
    path = f"/api/pay/{world.app.slug}/retry"
    body = {"authorizationCode": code, "developerUserId": "user-1", "idempotencyKey": "k:1"}
    with world.api() as api:
        refused(world.pay(api, stranger, "retry", code, "k:1"), 403, "WALLET_MISMATCH")
        refused(api.post(path, json=body, headers={
            "x-wallet-address": user.address,
            "x-svc-budget-spender": "0x000000000000000000000000000000000000dEaD"}), 403,
            "SPENDER_MISMATCH")
        assert charges(world) == 0
        # Header case does not matter: addresses compare lower-case.
        paid = api.post(path, json=body, headers={
            "x-wallet-address": user.address.lower(),
            "x-svc-budget-spender": PARAMS.spender.upper().replace("0X", "0x")})
        assert paid.status_code == 201, paid.text


def test_account_connection_must_match(world: PayWorld) -> None:
    user = wallet(1)
    first = connect(world, user, "merchant-1", 100_000)["summary"]
    second = connect(world, user, "merchant-2", 200_000, nonce=1)["summary"]
    one, two = first["accountConnectionId"], second["accountConnectionId"]
    assert one and two and one != two
    with world.api(origin=world.audience) as api:
        refused(api.post("/api/authorizations/payment-code", json={
            "authorizationCode": second["authorizationCode"],
            "paymentUrl": world.payment_url("retry"), "accountConnectionId": one}), 409,
            "ACCOUNT_CONNECTION_MISMATCH")
    code = world.payment_code(second["authorizationCode"], "retry", accountConnectionId=two)
    with world.api() as api:
        refused(world.pay(api, user, "retry", code, "k:1", accountConnectionId=one), 409,
                "ACCOUNT_CONNECTION_MISMATCH")
        refused(world.pay(api, user, "retry", code, "k:2", accountConnectionId="zconn_nope"),
                409, "ACCOUNT_CONNECTION_MISMATCH")
        assert charges(world) == 0
        paid = world.pay(api, user, "retry", code, "k:3", accountConnectionId=two)
        assert paid.status_code == 201, paid.text
    # A code without a connection refuses any connection id.
    plain = world.payment_code(world.authorize(wallet(2), 100_000)["code"], "retry")
    with world.api() as api:
        refused(world.pay(api, wallet(2), "retry", plain, "k:4", accountConnectionId=two), 409,
                "ACCOUNT_CONNECTION_MISMATCH")


def test_product_route_answers_are_readable_only_by_the_code_audience(world: PayWorld) -> None:
    user = wallet(1)
    code = world.payment_code(world.authorize(user, 100_000)["code"], "retry")
    with world.api(origin=world.audience) as api:
        first = world.pay(api, user, "retry", code, "k:1")
        replay = world.pay(api, user, "retry", code, "k:1")
    assert first.status_code == replay.status_code == 201
    assert first.headers["access-control-allow-origin"] == world.audience
    assert replay.headers["access-control-allow-origin"] == world.audience
    # Another page replaying the same request gets no CORS grant to read the answer.
    with world.api(origin="https://evil.example") as api:
        foreign = world.pay(api, user, "retry", code, "k:1")
    assert foreign.status_code == 201
    assert "access-control-allow-origin" not in foreign.headers


def test_code_bound_to_its_developer_user(world: PayWorld) -> None:
    """The grant goes to the user the code was made for: naming another is refused, and
    the code stays usable for the right one."""
    user = wallet(1)
    summary = world.authorize(user, 100_000)["code"]
    code = world.payment_code(summary, "retry", developerUserId="alice")
    with world.api() as api:
        refused(world.pay(api, user, "retry", code, "k:1", developerUserId="mallory"), 409,
                "AUTHORIZATION_CODE_INTENT_MISMATCH")
        paid = world.pay(api, user, "retry", code, "k:1", developerUserId=None)
        assert paid.status_code == 201, paid.text
    with world.keyed() as backend:
        delivery = backend.get(f"/api/deliveries/{paid.json()['deliveryId']}").json()
    assert delivery["delivery"]["developerUserId"] == "alice"
    assert charges(world) == 1


def test_order_bound_to_its_developer_user(world: PayWorld) -> None:
    """An order the backend made for one user is paid for that user, on both paths."""
    user = wallet(1)
    summary = world.authorize(user, 100_000)["code"]
    with world.keyed() as backend:
        created = backend.post("/api/orders", json={
            "productId": world.products["retry"].id, "developerUserId": "alice",
            "idempotencyKey": "order:alice"})
    assert created.status_code == 201, created.text
    order_id = created.json()["order"]["id"]
    with world.api(origin=world.audience) as api:
        refused(api.post("/api/authorizations/payment-code", json={
            "authorizationCode": summary, "paymentUrl": world.payment_url("retry"),
            "orderId": order_id, "developerUserId": "mallory"}), 409,
            "AUTHORIZATION_CODE_INTENT_MISMATCH")
    code = world.payment_code(summary, "retry", orderId=order_id, developerUserId=None)
    with world.api() as api:
        refused(world.pay(api, user, "retry", code, "k:1", orderId=order_id,
                          developerUserId="mallory"), 409, "AUTHORIZATION_CODE_INTENT_MISMATCH")
        paid = world.pay(api, user, "retry", code, "k:1", orderId=order_id,
                         developerUserId=None)
        assert paid.status_code == 201, paid.text
    with world.keyed() as backend:
        delivery = backend.get(f"/api/deliveries/{paid.json()['deliveryId']}").json()
        assert delivery["delivery"]["developerUserId"] == "alice"
        assert backend.get(f"/api/orders/{order_id}").json()["order"]["status"] == "paid"


def test_trusted_charge_for_an_order_goes_to_its_user(world: PayWorld) -> None:
    connection = connect(world, wallet(1), "alice", 100_000)["summary"][
        "accountConnectionId"]
    from tests.ledger.flow import add_product
    add_product(world, {"slug": "boost", "name": "Boost", "priceAtomic": "10000",
                        "riskPolicy": {"trustedServerCharge": {"enabled": True}}})
    with world.keyed() as backend:
        order_id = backend.post("/api/orders", json={
            "productId": world.products["boost"].id, "developerUserId": "alice",
            "idempotencyKey": "order:alice"}).json()["order"]["id"]
        body = {"productId": world.products["boost"].id, "accountConnectionId": connection,
                "orderId": order_id}
        refused(backend.post("/api/charges", json={**body, "idempotencyKey": "c:1",
                                                    "developerUserId": "mallory"}),
                409, "AUTHORIZATION_CODE_INTENT_MISMATCH")
        charged = backend.post("/api/charges", json={**body, "idempotencyKey": "c:2"})
        assert charged.status_code == 201, charged.text
        delivery = backend.get(f"/api/deliveries/{charged.json()['deliveryId']}").json()
    assert delivery["delivery"]["developerUserId"] == "alice"
