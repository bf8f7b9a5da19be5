"""Trusted-server charges (spec 4.4): the product's policy gates them, the cap holds, and
the ``paymentProof`` verifies with ``svc.proofs`` and with nothing changed, and says whether
the delivery may be fulfilled from it alone (spec 1.6)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction
from payments.ledger import idempotency
from payments.ledger.models import (
    Authorization,
    Charge,
    Delivery,
    IdempotencyRecord,
    Order,
    OrderStatus,
    WebhookAttempt,
    WebhookEvent,
)
from svc.proofs import (
    SCHEME,
    ProofError,
    canonical_json,
    proof_grantable,
    proven_delivery_status,
    verify_payment_proof,
)
from tests.ledger.flow import (
    PayWorld,
    add_product,
    build_world,
    connect,
    sign_permit,
    wallet,
)
from tests.ledger.legacy_proofs import legacy_proof
from tests.support.router import RouterFactory

TRUSTED = {"trustedServerCharge": {"enabled": True, "maxAmountAtomic": "20000"}}


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[PayWorld]:
    with start_router() as router:
        world = build_world(router, sessions)
        add_product(world, {"slug": "boost", "name": "Boost", "priceAtomic": "10000",
                            "riskPolicy": TRUSTED})
        add_product(world, {"slug": "credits", "name": "Credits", "priceAtomic": "1000",
                            "pricing": "dynamic_order", "minAmountAtomic": "1000",
                            "maxAmountAtomic": "1000000", "riskPolicy": TRUSTED})
        add_product(world, {"slug": "relic", "name": "Relic", "priceAtomic": "10000",
                            "riskMode": "settled_first", "riskPolicy": TRUSTED})
        yield world


def charge(world: PayWorld, product: str, connection_id: str, key: str,
           **extra: Any) -> httpx.Response:
    with world.keyed() as backend:
        return backend.post("/api/charges", json={
            "productId": world.products[product].id, "accountConnectionId": connection_id,
            "idempotencyKey": key, "developerUserId": "user-1", **extra})


def refused(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["code"] == code and response.json()["message"]


def count(world: PayWorld, model: type) -> int:
    with world.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


@pytest.fixture
def connection_id(world: PayWorld) -> str:
    """A connection made for ``user-1``, the user :func:`charge` names."""
    connection: str = connect(world, wallet(1), "user-1", 100_000)["summary"][
        "accountConnectionId"]
    return connection


def money_state(world: PayWorld) -> tuple[int, int, int, int, int, list[int]]:
    """Everything a charge writes: charges, deliveries, events, outbox attempts, paid
    orders and the budgets' spent amounts."""
    with world.sessions() as session:
        spent = list(session.scalars(select(Authorization.spent_atomic)
                                     .order_by(Authorization.id)))
        paid = session.scalar(select(func.count()).select_from(Order).where(
            Order.status == OrderStatus.PAID)) or 0
    return (count(world, Charge), count(world, Delivery), count(world, WebhookEvent),
            count(world, WebhookAttempt), int(paid), spent)


def test_a_charge_for_another_user_than_the_connection_is_refused(world: PayWorld) -> None:
    """Ada's connection pays for Ada: naming Bob (by mistake, or a connection id taken
    from a client) charges nothing, so Bob gets no item Ada's wallet paid for."""
    ada = connect(world, wallet(1), "ada", 100_000)["summary"]["accountConnectionId"]
    before = money_state(world)
    refused(charge(world, "boost", ada, "game:boost:bob", developerUserId="bob"), 409,
            "ACCOUNT_CONNECTION_MISMATCH")
    # Case and spacing are part of the id the handoff was made with.
    refused(charge(world, "boost", ada, "game:boost:Ada", developerUserId="Ada"), 409,
            "ACCOUNT_CONNECTION_MISMATCH")
    assert money_state(world) == before
    # The refusal stored no answer: the key is still free for the right user.
    paid = charge(world, "boost", ada, "game:boost:bob", developerUserId="ada")
    assert paid.status_code == 201, paid.text
    assert verify_payment_proof(paid.json()["paymentProof"], world.api_key)[
        "developerUserId"] == "ada"
    with world.keyed() as backend:
        delivery = backend.get(f"/api/deliveries/{paid.json()['deliveryId']}").json()
    assert delivery["delivery"]["developerUserId"] == "ada"
    with world.sessions() as session:
        event = session.scalars(select(WebhookEvent)).one()
    assert event.payload["delivery"]["developerUserId"] == "ada"
    assert count(world, Charge) == 1


def test_an_order_for_another_user_than_the_connection_is_refused(world: PayWorld) -> None:
    ada = connect(world, wallet(1), "ada", 100_000)["summary"]["accountConnectionId"]
    with world.keyed() as backend:
        order = backend.post("/api/orders", json={
            "productId": world.products["boost"].id, "developerUserId": "bob",
            "idempotencyKey": "order:bob"}).json()["order"]
    before = money_state(world)
    # The user left out (the order's is taken) or named as the order's: Bob's order is
    # not paid from Ada's connection either way.
    refused(charge(world, "boost", ada, "c:1", orderId=order["id"], developerUserId=None),
            409, "ACCOUNT_CONNECTION_MISMATCH")
    refused(charge(world, "boost", ada, "c:2", orderId=order["id"], developerUserId="bob"),
            409, "ACCOUNT_CONNECTION_MISMATCH")
    assert money_state(world) == before
    with world.keyed() as backend:
        assert backend.get(f"/api/orders/{order['id']}").json()["order"]["status"] == \
            "created"


def test_a_charge_naming_no_user_is_refused_and_charges_nothing(world: PayWorld,
                                                                connection_id: str) -> None:
    """A connection is made for one user, but the service keeps only a hash of that user
    (spec 4.5), so it can neither check nor record a user the charge does not name: a
    charge with no ``developerUserId`` and no order is refused before anything is written,
    and the key stays free for the same charge naming the connection's user."""
    before = money_state(world)
    missing = charge(world, "boost", connection_id, "game:boost:anon", developerUserId=None)
    refused(missing, 422, "missing_field")
    assert missing.json()["field"] == "developerUserId"
    assert money_state(world) == before
    paid = charge(world, "boost", connection_id, "game:boost:anon")  # names user-1
    assert paid.status_code == 201, paid.text
    assert verify_payment_proof(paid.json()["paymentProof"], world.api_key)[
        "developerUserId"] == "user-1"
    with world.keyed() as backend:
        delivery = backend.get(f"/api/deliveries/{paid.json()['deliveryId']}").json()
    assert delivery["delivery"]["developerUserId"] == "user-1"
    with world.sessions() as session:
        event = session.scalars(select(WebhookEvent)).one()
        stored = session.scalars(select(Delivery)).one()
    assert event.payload["delivery"]["developerUserId"] == "user-1"
    assert stored.developer_user_id == "user-1"


def test_a_charge_with_no_user_made_before_it_was_refused_still_replays(
        world: PayWorld, connection_id: str) -> None:
    """Its stored answer (30 days) is found before the body is judged: a retry of a charge
    that named no user while that was accepted gets that charge, not a refusal."""
    paid = charge(world, "boost", connection_id, "game:boost:old")
    assert paid.status_code == 201, paid.text
    with transaction(world.sessions) as session:  # as if stored for a charge naming nobody
        record = session.scalars(select(IdempotencyRecord).where(
            IdempotencyRecord.key == "game:boost:old")).one()
        record.request_hash = idempotency.fingerprint({
            "productId": world.products["boost"].id, "orderId": None,
            "accountConnectionId": connection_id, "developerUserId": None})
    replayed = charge(world, "boost", connection_id, "game:boost:old", developerUserId=None)
    assert (replayed.status_code, replayed.json()) == (201, paid.json())
    assert count(world, Charge) == 1


def test_policy_gates_trusted_charges(world: PayWorld, connection_id: str) -> None:
    refused(charge(world, "retry", connection_id, "c:1"), 403, "TRUSTED_CHARGE_NOT_ALLOWED")
    # legendary allows them, but its price (100 000) is over its cap (50 000).
    refused(charge(world, "legendary", connection_id, "c:2"), 403, "TRUSTED_CHARGE_OVER_LIMIT")
    with world.keyed() as backend:
        order = backend.post("/api/orders", json={
            "productId": world.products["credits"].id, "developerUserId": "user-1",
            "idempotencyKey": "o:1", "amountAtomic": "20001"}).json()["order"]
    refused(charge(world, "credits", connection_id, "c:3", orderId=order["id"]), 403,
            "TRUSTED_CHARGE_OVER_LIMIT")
    refused(charge(world, "credits", connection_id, "c:4"), 409, "ORDER_REQUIRED")
    refused(charge(world, "boost", "zconn_nope", "c:5"), 409, "ACCOUNT_CONNECTION_MISMATCH")
    assert count(world, Charge) == 0


def test_trusted_charge_returns_a_verifiable_proof(world: PayWorld,
                                                  connection_id: str) -> None:
    response = charge(world, "boost", connection_id, "game:boost:1")
    assert response.status_code == 201, response.text
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    proof = body["paymentProof"]
    assert proof["scheme"] == SCHEME
    payload = verify_payment_proof(proof, world.api_key)
    assert payload["chargeId"] == body["chargeId"]
    assert payload["deliveryId"] == body["deliveryId"]
    assert payload["idempotencyKey"] == body["idempotencyKey"] == "svc:game:boost:1"
    assert payload["amountAtomic"] == body["amountAtomic"] == "10000"
    assert payload["appId"] == world.app.id
    assert payload["productId"] == world.products["boost"].id
    assert payload["accountConnectionId"] == connection_id
    assert payload["ownerWallet"] == wallet(1).address.lower()
    assert payload["developerUserId"] == "user-1" and payload["issuedAt"]
    assert body["remaining"] == "90000" and body["status"] == "delivered"
    # an optimistic product: delivered at once, so the proof alone may grant (spec 1.6)
    assert (payload["riskMode"], payload["deliveryStatus"]) == ("optimistic", "delivered")
    assert proof_grantable(payload)

    again = charge(world, "boost", connection_id, "game:boost:1")
    assert again.status_code == 201 and again.json() == body  # the same answer, same proof
    assert count(world, Charge) == 1
    with world.sessions() as session:
        event = session.scalars(select(WebhookEvent)).one()
    assert event.type == "payment.delivered"
    assert event.payload["product"]["paymentPath"] == "trusted_server"

    with world.keyed() as backend:
        order = backend.post("/api/orders", json={
            "productId": world.products["credits"].id, "developerUserId": "user-1",
            "idempotencyKey": "o:1", "amountAtomic": "15000"}).json()["order"]
        paid = charge(world, "credits", connection_id, "game:credits:1", orderId=order["id"])
        assert paid.status_code == 201, paid.text
        assert verify_payment_proof(paid.json()["paymentProof"], world.api_key)[
            "amountAtomic"] == "15000"
        assert backend.get(f"/api/orders/{order['id']}").json()["order"]["status"] == "paid"
        refused(charge(world, "credits", connection_id, "game:credits:2",
                       orderId=order["id"]), 409, "ORDER_ALREADY_PAID")


def test_a_settled_first_proof_says_it_awaits_settlement(world: PayWorld,
                                                         connection_id: str) -> None:
    response = charge(world, "relic", connection_id, "game:relic:1")
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["status"] == "awaiting_settlement" and body["eventId"] is None
    payload = verify_payment_proof(body["paymentProof"], world.api_key)
    assert (payload["riskMode"], payload["deliveryStatus"]) == ("settled_first",
                                                                "awaiting_settlement")
    assert proven_delivery_status(payload) == "awaiting_settlement"
    assert not proof_grantable(payload)  # paid, not to be fulfilled before settlement
    # claiming it was delivered breaks the signature
    for changed in ({"deliveryStatus": "delivered"}, {"riskMode": "optimistic"},
                    {"riskMode": "optimistic", "deliveryStatus": "delivered"}):
        claimed = {**body["paymentProof"], "payload": {**payload, **changed}}
        with pytest.raises(ProofError, match="does not match"):
            verify_payment_proof(claimed, world.api_key)
    # an idempotent replay is the stored answer: the same proof, as issued
    assert charge(world, "relic", connection_id, "game:relic:1").json() == body
    assert count(world, WebhookEvent) == 0  # payment.delivered follows settlement


def test_a_proof_without_the_status_grants_nothing_by_itself(world: PayWorld,
                                                             connection_id: str) -> None:
    """A proof issued before proofs carried ``deliveryStatus`` still verifies (it was
    signed over what it holds) but proves no status: look the delivery up."""
    proof = charge(world, "boost", connection_id, "game:boost:1").json()["paymentProof"]
    older = legacy_proof(proof, world.api_key)
    payload = verify_payment_proof(older, world.api_key)
    assert "deliveryStatus" not in payload and "riskMode" not in payload
    assert proven_delivery_status(payload) is None and not proof_grantable(payload)
    with pytest.raises(ProofError):  # nor can the status be added to it afterwards
        verify_payment_proof({**older, "payload": {**payload, "deliveryStatus": "delivered"}},
                             world.api_key)
    for odd in ("DELIVERED", "", None, 1, ["delivered"]):
        assert not proof_grantable({**payload, "deliveryStatus": odd})


def test_no_budget_means_needs_budget(world: PayWorld, connection_id: str) -> None:
    with world.api(origin=world.portal) as api:
        revoked = api.post("/api/authorizations/revoke",
                           json={"permit": sign_permit(wallet(1), 0, nonce=1)})
    assert revoked.status_code == 200, revoked.text
    refused(charge(world, "boost", connection_id, "c:1"), 402, "needs_budget")
    assert count(world, Charge) == 0


def test_proof_fails_on_any_change(world: PayWorld, connection_id: str) -> None:
    proof = charge(world, "boost", connection_id, "game:boost:1").json()["paymentProof"]
    verify_payment_proof(proof, world.api_key)
    raw = canonical_json(proof["payload"])
    tried = 0
    for index in range(len(raw)):
        for flip in (0x01, 0x20):
            changed = bytearray(raw)
            changed[index] ^= flip
            try:
                payload = json.loads(bytes(changed))
            except ValueError:
                continue  # not JSON any more: nothing a receiver could be handed
            if not isinstance(payload, dict) or payload == proof["payload"]:
                continue
            tried += 1
            with pytest.raises(ProofError):
                verify_payment_proof({**proof, "payload": payload}, world.api_key)
    assert tried > len(raw)  # most single-byte changes still parse, and all were caught

    for name, value in proof["payload"].items():  # a dropped or an added field
        without = {k: v for k, v in proof["payload"].items() if k != name}
        with pytest.raises(ProofError):
            verify_payment_proof({**proof, "payload": without}, world.api_key)
        with pytest.raises(ProofError):
            verify_payment_proof({**proof, "payload": {**proof["payload"], name: [value]}},
                                 world.api_key)
    with pytest.raises(ProofError):
        verify_payment_proof({**proof, "payload": {**proof["payload"], "extra": 1}},
                             world.api_key)


def test_proof_refuses_bad_signatures_and_schemes(world: PayWorld,
                                                  connection_id: str) -> None:
    proof = charge(world, "boost", connection_id, "game:boost:1").json()["paymentProof"]
    digest = proof["signature"].removeprefix("sha256=")
    flipped = "sha256=" + ("0" if digest[0] != "0" else "1") + digest[1:]
    bad_proofs: list[Any] = [
        None, "proof", [proof], {}, {k: v for k, v in proof.items() if k != "signature"},
        {k: v for k, v in proof.items() if k != "payload"},
        {k: v for k, v in proof.items() if k != "scheme"},
        {**proof, "scheme": "svc.proof.v2"}, {**proof, "scheme": None},
        {**proof, "payload": "not-an-object"}, {**proof, "payload": None},
        {**proof, "signature": flipped}, {**proof, "signature": digest},
        {**proof, "signature": "sha256=" + digest.upper()}, {**proof, "signature": ""},
        {**proof, "signature": "sha1=" + digest}, {**proof, "signature": 12},
        {**proof, "signature": "sha256=" + digest + "00"},
        {**proof, "signature": "sha256=" + digest[:-1] + "é"},
    ]
    for bad in bad_proofs:
        with pytest.raises(ProofError):
            verify_payment_proof(bad, world.api_key)
    with pytest.raises(ProofError, match="signed with another key"):
        verify_payment_proof(proof, world.api_key + "x")
    with pytest.raises(ProofError):
        verify_payment_proof(proof, "")
    assert verify_payment_proof(dict(proof), world.api_key) == proof["payload"]


def test_sdk_helpers_import_no_server_package() -> None:
    probe = ("import sys, svc.proofs, svc.handoff\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('payments', 'router', 'portal', 'ops', 'manifest', 'sqlalchemy', 'starlette')))")
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           check=True, timeout=60)
    assert found.stdout.strip() == "[]"


def test_one_key_sent_in_parallel_is_one_charge_and_one_answer(world: PayWorld,
                                                               connection_id: str) -> None:
    """The SDK retries with the same key when an answer is late; a retry that overlaps the
    first call must get the first call's answer, not a refusal (it was charged)."""
    from tests.ledger.parallel import run_parallel

    def post(client: httpx.Client) -> httpx.Response:
        return client.post("/api/charges", json={
            "productId": world.products["boost"].id, "accountConnectionId": connection_id,
            "idempotencyKey": "game:boost:race", "developerUserId": "user-1"})

    responses = run_parallel(world, [post] * 12, workers=12,
                             authorization=f"Bearer {world.api_key}")
    assert [r.status_code for r in responses] == [201] * 12, [r.text for r in responses][:3]
    assert len({r.json()["chargeId"] for r in responses}) == 1
    assert len({json.dumps(r.json(), sort_keys=True) for r in responses}) == 1
    assert count(world, Charge) == 1
