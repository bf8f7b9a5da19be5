"""Budgets (spec 1.9, 1.6, 3.6): revoke, renewal, expiry, settled_first products, and the
owner-proof return that reuses an active budget without a new permit."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction, utcnow
from payments.ledger.models import (
    AuthCode,
    Authorization,
    AuthorizationStatus,
    Charge,
    Delivery,
    DeliveryStatus,
    WebhookAttempt,
    WebhookEvent,
)
from tests.ledger.flow import (
    PayWorld,
    add_product,
    build_world,
    sign_owner_proof,
    sign_owner_proof_as,
    sign_permit,
    wallet,
)
from tests.support.router import RouterFactory


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[PayWorld]:
    with start_router() as router:
        yield build_world(router, sessions)


def count(world: PayWorld, model: type) -> int:
    with world.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


def refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["code"] == code and body["message"]
    return body


def revoke(world: PayWorld, permit: dict[str, Any]) -> httpx.Response:
    with world.api(origin=world.portal) as api:
        return api.post("/api/authorizations/revoke", json={"permit": permit})


def return_with(world: PayWorld, permit: dict[str, Any]) -> dict[str, Any]:
    with world.api(origin=world.portal) as api:
        response = api.post("/api/authorizations/return-code", json={
            "app": world.app.slug, "returnUrl": f"{world.portal}/{world.app.slug}",
            "permit": permit})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_revoked_budget_refuses_payment(world: PayWorld) -> None:
    user = wallet(1)
    summary = world.authorize(user, 100_000)["code"]
    code = world.payment_code(summary, "retry")
    revoked = revoke(world, sign_permit(user, 0, nonce=1))
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["authorization"]["status"] == "revoked"
    assert revoked.json()["authorization"]["remaining"] == "0"
    with world.api() as api:
        body = refused(world.pay(api, user, "retry", code, "k:1"), 402, "AUTHORIZATION_REVOKED")
        assert body["budgetState"] == "budget_revoked"
        # Refused, not consumed: the same code keeps saying why.
        refused(world.pay(api, user, "retry", code, "k:2"), 402, "AUTHORIZATION_REVOKED")
    with world.api(origin=world.audience) as api:
        view = api.get("/api/authorizations/summary", params={"code": summary}).json()
        assert view["status"] == "revoked" and view["remaining"] == "0"
    refused(revoke(world, sign_permit(user, 0, nonce=2)), 404, "no_active_budget")
    assert count(world, Charge) == 0
    with world.sessions() as session:
        budget = session.scalars(select(Authorization)).one()
        assert budget.status == AuthorizationStatus.REVOKED
        assert budget.revoke_nonce == 1 and budget.revoke_signature
        assert budget.revoke_relay_status is not None
        assert budget.revoke_relay_status.value == "pending"


def test_revoke_needs_a_newer_nonce_and_value_zero(world: PayWorld) -> None:
    user = wallet(1)
    world.authorize(user, 100_000, nonce=3)
    refused(revoke(world, sign_permit(user, 0, nonce=3)), 409, "permit_nonce_stale")
    refused(revoke(world, sign_permit(user, 1, nonce=4)), 422, "invalid_permit")
    assert revoke(world, sign_permit(user, 0, nonce=4)).status_code == 200


def test_renewal_supersedes_and_carries_unsettled_charges(world: PayWorld) -> None:
    user = wallet(1)
    first = world.authorize(user, 100_000)
    old_code = world.payment_code(first["code"], "retry")
    spare_old_code = world.payment_code(first["code"], "retry")
    with world.api() as api:
        assert world.pay(api, user, "retry", old_code, "k:1").json()["remaining"] == "90000"
    with world.api(origin=world.portal) as api:
        stale = api.post("/api/authorizations/return-code", json={
            "app": world.app.slug, "returnUrl": f"{world.portal}/{world.app.slug}",
            "permit": sign_permit(user, 70_000, nonce=0)})
        refused(stale, 409, "permit_nonce_stale")
    renewal = sign_permit(user, 50_000, nonce=1)
    renewed = return_with(world, renewal)
    summary = renewed["summary"]
    assert summary["authorizationId"] != first["summary"]["authorizationId"]
    # The queued 10 000 still draws on the token allowance the new permit sets.
    assert summary["remaining"] == "40000" and summary["status"] == "active"
    with world.sessions() as session:
        rows = {a.id: a for a in session.scalars(select(Authorization))}
        assert rows[first["summary"]["authorizationId"]].status == AuthorizationStatus.SUPERSEDED
        new = rows[summary["authorizationId"]]
        assert (new.value_atomic, new.spent_atomic, new.nonce) == (50_000, 10_000, 1)
    code = world.payment_code(renewed["code"], "unlock-level")
    with world.api() as api:
        paid = world.pay(api, user, "unlock-level", code, "k:2")
        assert paid.status_code == 201, paid.text
        assert paid.json()["remaining"] == "10000"
        # A code taken from the superseded budget cannot spend it any more.
        late = world.pay(api, user, "retry", spare_old_code, "k:3")
        assert late.status_code == 402, late.text
    assert count(world, Charge) == 2
    # The same renewal permit sent again is refused and changes nothing.
    with world.api(origin=world.portal) as api:
        again = api.post("/api/authorizations/return-code", json={
            "app": world.app.slug, "returnUrl": f"{world.portal}/{world.app.slug}",
            "permit": renewal})
        refused(again, 409, "permit_already_used")
    with world.sessions() as session:
        renewed_row = session.get(Authorization, summary["authorizationId"])
        assert renewed_row is not None and renewed_row.spent_atomic == 40_000


def test_exhausted_and_expired_budgets(world: PayWorld) -> None:
    user = wallet(1)
    summary = world.authorize(user, 35_000)["code"]
    with world.api() as api:
        first = world.pay(api, user, "unlock-level", world.payment_code(summary, "unlock-level"),
                          "k:1")
        assert first.json()["remaining"] == "5000"
        body = refused(world.pay(api, user, "retry", world.payment_code(summary, "retry"), "k:2"),
                       402, "INSUFFICIENT_BUDGET")
        assert body["remaining"] == "5000" and body["budgetState"] == "needs_budget"
    with transaction(world.sessions) as session:
        session.execute(update(Authorization).values(deadline=utcnow() - timedelta(seconds=1),
                                                     spent_atomic=0))
    with world.api() as api:
        body = refused(world.pay(api, user, "retry", world.payment_code(summary, "retry"), "k:3"),
                       402, "AUTHORIZATION_EXPIRED")
        assert body["budgetState"] == "budget_expired"
    assert count(world, Charge) == 1


def test_an_amount_at_the_ledgers_limit_is_refused_not_overflowed(world: PayWorld) -> None:
    """The largest price the ledger takes (2**63 - 1) against a budget already drawn on:
    ``spent + amount`` is past BIGINT, which PostgreSQL refuses with an error (a 500) where
    the budget check should just say the budget does not cover it."""
    user = wallet(1)
    add_product(world, {"slug": "whale", "name": "Whale", "priceAtomic": str(2**63 - 1)})
    summary = world.authorize(user, 1_000_000)["code"]
    with world.api() as api:
        first = world.pay(api, user, "retry", world.payment_code(summary, "retry"), "k:1")
        assert first.status_code == 201, first.text
        body = refused(world.pay(api, user, "whale", world.payment_code(summary, "whale"),
                                 "k:2"), 402, "INSUFFICIENT_BUDGET")
    assert body["remaining"] == "990000"
    assert count(world, Charge) == 1
    with world.sessions() as session:
        assert session.scalars(select(Authorization.spent_atomic)).one() == 10_000


def test_settled_first_waits_for_settlement(world: PayWorld) -> None:
    user = wallet(1)
    code = world.payment_code(world.authorize(user, 1_000_000)["code"], "legendary")
    with world.api() as api:
        paid = world.pay(api, user, "legendary", code, "game:legendary:1")
    assert paid.status_code == 201, paid.text
    body = paid.json()
    assert body["status"] == "awaiting_settlement" and body["eventId"] is None
    assert body["settlementStatus"] == "queued" and body["amountAtomic"] == "100000"
    # No payment.delivered (nor any other event) before settlement.
    assert count(world, WebhookEvent) == 0 and count(world, WebhookAttempt) == 0
    with world.sessions() as session:
        delivery = session.scalars(select(Delivery)).one()
        assert delivery.status == DeliveryStatus.AWAITING_SETTLEMENT
        assert delivery.delivered_at is None and not delivery.fulfilled
    with world.keyed() as backend:
        view = backend.get(f"/api/deliveries/{body['deliveryId']}").json()["delivery"]
    assert view["status"] == "awaiting_settlement" and view["deliveredAt"] is None


# -- owner-proof returns ------------------------------------------------------------------


def proof_return(world: PayWorld, proof: dict[str, Any],
                 return_url: str | None = None) -> httpx.Response:
    with world.api(origin=world.portal) as api:
        return api.post("/api/authorizations/return-code", json={
            "app": world.app.slug, "returnUrl": return_url or f"{world.portal}/{world.app.slug}",
            "ownerProof": proof})


def test_owner_proof_return_reuses_an_active_budget(world: PayWorld) -> None:
    user = wallet(1)
    return_url = f"{world.portal}/{world.app.slug}"
    budget_id = world.authorize(user, 100_000)["summary"]["authorizationId"]
    returned = proof_return(world, sign_owner_proof(user, world.app.slug, return_url, budget_id))
    assert returned.status_code == 200, returned.text
    summary = returned.json()["summary"]
    assert summary["authorizationId"] == budget_id and summary["remaining"] == "100000"
    code = world.payment_code(returned.json()["code"], "retry")
    with world.api() as api:
        assert world.pay(api, user, "retry", code, "k:1").status_code == 201
    assert count(world, Authorization) == 1


def test_an_owner_proof_counts_once(world: PayWorld) -> None:
    """Like a permit: a wallet check seen once (a log, a proxy) gets no second code."""
    user = wallet(1)
    return_url = f"{world.portal}/{world.app.slug}"
    budget_id = world.authorize(user, 100_000)["summary"]["authorizationId"]
    proof = sign_owner_proof(user, world.app.slug, return_url, budget_id)
    assert proof_return(world, proof).status_code == 200
    codes_before = count(world, AuthCode)
    refused(proof_return(world, proof), 409, "owner_proof_used")
    # The same signature spelt with v as 0/1, or in its high-s twin: the same proof.
    raw = proof["signature"][2:]
    r, s, v = raw[:64], int(raw[64:128], 16), int(raw[128:], 16)
    order = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
    for signature in (f"0x{r}{s:064x}{v - 27:02x}", f"0x{r}{order - s:064x}{v ^ 1:02x}"):
        again = proof_return(world, {**proof, "signature": signature})
        assert again.status_code in (409, 422), again.text
        assert again.json()["code"] in ("owner_proof_used", "invalid_owner_proof")
    assert count(world, AuthCode) == codes_before
    # A new check, signed a moment later, works.
    later = sign_owner_proof_as(user, user.address, world.app.slug, return_url, budget_id,
                                (utcnow() + timedelta(seconds=1)).isoformat())
    assert proof_return(world, later).status_code == 200


def test_owner_proof_refusals(world: PayWorld) -> None:
    user, stranger = wallet(1), wallet(2)
    slug, return_url = world.app.slug, f"{world.portal}/{world.app.slug}"
    budget_id = world.authorize(user, 100_000)["summary"]["authorizationId"]
    other_budget = world.authorize(stranger, 100_000)["summary"]["authorizationId"]
    now = utcnow()

    def proof(signer: Any = user, issued: Any = now, owner: str = user.address,
              budget: str = budget_id, url: str = return_url) -> dict[str, Any]:
        text = issued if isinstance(issued, str) else issued.isoformat()
        return sign_owner_proof_as(signer, owner, slug, url, budget, text)

    refused(proof_return(world, proof(signer=stranger)), 422, "invalid_owner_proof")
    refused(proof_return(world, proof(issued=now - timedelta(minutes=10))), 422,
            "owner_proof_expired")
    refused(proof_return(world, proof(issued=now + timedelta(minutes=5))), 422,
            "owner_proof_expired")
    refused(proof_return(world, proof(issued="yesterday")), 422, "invalid_owner_proof")
    # An ISO time without an offset is not a point in time we can age.
    naive = now.replace(tzinfo=None).isoformat()
    refused(proof_return(world, proof(issued=naive)), 422, "invalid_owner_proof")
    # Bound to the return URL it was signed for.
    refused(proof_return(world, proof(), "http://localhost:5173/game/x"), 422,
            "invalid_owner_proof")
    # Someone else's budget, even with a valid signature of one's own.
    refused(proof_return(world, proof(budget=other_budget)), 402, "needs_budget")
    refused(proof_return(world, proof(budget="zauth_nope")), 402, "needs_budget")
    forged = {**proof(), "signature": "0x" + "11" * 65}
    refused(proof_return(world, forged), 422, "invalid_owner_proof")
    # A revoked budget cannot be reused by proof.
    assert revoke(world, sign_permit(user, 0, nonce=1)).status_code == 200
    refused(proof_return(world, proof()), 402, "needs_budget")
