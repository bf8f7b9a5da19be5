"""A ``paymentProof`` grants by itself only when it says the delivery is ``delivered``
(spec 1.4 item 3, 1.6): a ``settled_first`` product's proof says ``awaiting_settlement`` and
is answered like a delivery lookup that awaits settlement, then granted after settlement; a
proof issued before proofs carried the status is looked up."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from svc.backend import BackendClient, TrustedCharge
from tests.ledger.flow import connect, wallet
from tests.ledger.legacy_proofs import legacy_proof, make_stored_charge_legacy
from tests.reference_app.test_endpoints import call
from tests.reference_app.world import (
    PLAYER_ID,
    RefWorld,
    disable_webhook,
    reference_world,
    sqlite_store,
    wait_for_value,
)
from tests.support.router import RouterFactory

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def sdk_charge(world: RefWorld, product: str, connection_id: str, key: str) -> TrustedCharge:
    """What a backend charging with the SDK gets (the proof it may send to the app)."""
    with BackendClient(world.router.settings.base_url, world.api_key) as backend:
        return backend.create_trusted_charge(
            product_id=world.products[product].id, account_connection_id=connection_id,
            developer_user_id=PLAYER_ID, idempotency_key=key)


def submit(world: RefWorld, token: str, proof: Any) -> dict[str, Any]:
    """The app's answer to the proof, with its HTTP status as ``http``."""
    answer = call(world, token, "/api/svc/payment-submitted", {"paymentProof": proof})
    return {**answer.json(), "http": answer.status_code}


def test_a_proof_grants_only_when_it_says_delivered(ref: RefWorld) -> None:
    disable_webhook(ref)  # only the callback could grant here
    connection_id = connect(ref, wallet(17), PLAYER_ID, 1_000_000)["summary"][
        "accountConnectionId"]
    token = ref.log_in()
    relic = sdk_charge(ref, "relic", connection_id, "proof-relic").raw["paymentProof"]
    assert relic["payload"]["deliveryStatus"] == "awaiting_settlement"
    # as a lookup of a delivery awaiting settlement answers: not yet, retry later
    waiting = submit(ref, token, relic)
    assert (waiting["http"], waiting["code"]) == (409, "delivery_not_ready"), waiting
    assert waiting["deliveryStatus"] == "awaiting_settlement" and waiting["retryable"]
    claimed = copy.deepcopy(relic)
    claimed["payload"]["deliveryStatus"] = "delivered"
    refused = submit(ref, token, claimed)
    assert (refused["http"], refused["code"]) == (422, "payment_proof_invalid")
    assert ref.grants() == []

    gem = sdk_charge(ref, "gem", connection_id, "proof-gem").raw["paymentProof"]
    assert gem["payload"]["deliveryStatus"] == "delivered"
    granted = submit(ref, token, gem)
    assert (granted["http"], granted["granted"]) == (200, True), granted
    assert granted["grant"]["source"] == "proof"
    assert [g.delivery_id for g in ref.grants()] == [gem["payload"]["deliveryId"]]


def test_a_proof_without_the_status_is_looked_up(ref: RefWorld) -> None:
    """Proofs issued before they carried ``deliveryStatus`` (spec 1.6 could not be read
    from them): an optimistic one still grants, from the lookup; a settled_first one
    waits like any delivery awaiting settlement."""
    disable_webhook(ref)
    connection_id = connect(ref, wallet(18), PLAYER_ID, 1_000_000)["summary"][
        "accountConnectionId"]
    token = ref.log_in()
    relic = legacy_proof(sdk_charge(ref, "relic", connection_id, "old-relic").raw[
        "paymentProof"], ref.api_key)
    waiting = submit(ref, token, relic)
    assert (waiting["http"], waiting["code"]) == (409, "delivery_not_ready"), waiting
    gem = legacy_proof(sdk_charge(ref, "gem", connection_id, "old-gem").raw["paymentProof"],
                       ref.api_key)
    granted = submit(ref, token, gem)
    assert (granted["http"], granted["granted"]) == (200, True), granted
    assert granted["grant"]["source"] == "lookup"

    # the app's own trusted charge, replaying a charge stored with such a proof
    for product in ("gem", "relic"):
        sdk_charge(ref, product, connection_id, f"ref:{product}:old")
        make_stored_charge_legacy(ref.sessions, ref.api_key, f"ref:{product}:old")
    replayed = call(ref, token, "/api/svc/trusted-charge", {
        "productSlug": "gem", "idempotencyKey": "ref:gem:old"})
    assert replayed.status_code == 201, replayed.text
    assert replayed.json()["granted"] is True
    assert replayed.json()["grant"]["source"] == "lookup"
    pending = call(ref, token, "/api/svc/trusted-charge", {
        "productSlug": "relic", "idempotencyKey": "ref:relic:old"})
    assert pending.status_code == 202, pending.text
    assert pending.json()["status"] == "pending"
    assert pending.json()["deliveryStatus"] == "awaiting_settlement"
    assert len(ref.grants()) == 2


def test_a_settled_first_proof_grants_after_settlement(
        start_router: RouterFactory, sessions: sessionmaker[Session], tmp_path: Path) -> None:
    # Settlement only when two charges are queued: the first waits as long as the test needs.
    with reference_world(start_router, sessions, sqlite_store(tmp_path), chain_workers=True,
                         chain_worker_interval=0.1, settlement_batch_size=2,
                         settlement_batch_age_seconds=600.0) as world:
        disable_webhook(world)  # the grant below is the callback's, from the lookup
        connection_id = connect(world, wallet(19), PLAYER_ID, 1_000_000)["summary"][
            "accountConnectionId"]
        token = world.log_in()
        paid = call(world, token, "/api/svc/trusted-charge", {
            "productSlug": "relic", "idempotencyKey": "ref:relic:settle"})
        assert paid.status_code == 202, paid.text
        assert paid.json()["deliveryStatus"] == "awaiting_settlement"
        charge = sdk_charge(world, "relic", connection_id, "ref:relic:settle")  # a replay
        proof = charge.raw["paymentProof"]
        waiting = submit(world, token, proof)
        assert (waiting["http"], waiting["code"]) == (409, "delivery_not_ready"), waiting

        second = call(world, token, "/api/svc/trusted-charge", {
            "productSlug": "gem", "idempotencyKey": "ref:gem:settle"})
        assert second.status_code == 201, second.text  # two queued: the batch settles

        def delivered() -> bool:
            with BackendClient(world.router.settings.base_url, world.api_key) as backend:
                return backend.get_delivery(charge.delivery.id).grantable
        wait_for_value(delivered, "settlement of the settled_first charge", timeout=90)
        # a replay still answers the proof as issued: a statement about its issue time
        again = sdk_charge(world, "relic", connection_id, "ref:relic:settle")
        assert again.raw["paymentProof"] == proof and not again.delivery.grantable
        granted = submit(world, token, proof)
        assert (granted["http"], granted["granted"]) == (200, True), granted
        assert granted["grant"]["source"] == "lookup"
        assert granted["grant"]["deliveryId"] == charge.delivery.id
        assert submit(world, token, proof)["granted"] is False
