"""The typed backend client against the real service, on SQLite and PostgreSQL, sync and
async: orders, delivery and receipt lookups, handoffs, trusted charges with a verified
``paymentProof``, and the spec's error codes."""

from __future__ import annotations

from typing import Any

import pytest

from payments.db import transaction, utcnow
from payments.developer.keys import create_key
from svc.backend import STATUS_UNPROVEN, BackendError, Connection, ProofError
from svc.handoff import HANDOFF_FIELDS
from tests.ledger.flow import handoff_token, wallet
from tests.ledger.legacy_proofs import make_stored_charge_legacy
from tests.sdk.conftest import Connect, SdkWorld


def bound_connection(world: SdkWorld, backend: Connect, merchant: str) -> str:
    """The handoff the backend starts, then the portal's return binding it."""
    with backend() as client:
        started = client.create_account_handoff(
            app_slug=world.app.slug, merchant_user_id=merchant, game_account_label="P1",
            return_url=f"{world.portal}/{world.app.slug}")
    returned = world.authorize(wallet(5), 100_000, handoff=handoff_token(started.portal_url))
    connection_id: str = returned["summary"]["accountConnectionId"]
    return connection_id


def test_orders_are_created_read_and_replayed(world: SdkWorld, backend: Connect) -> None:
    product = world.products["retry"]
    with backend() as client:
        order = client.create_order(product_id=product.id, developer_user_id="user-1",
                                    idempotency_key="game:retry:o1")
        assert order.id.startswith("zord_") and order.status == "created"
        assert (order.amount_atomic, order.product_id) == (10_000, product.id)
        assert order.payment_url == world.payment_url("retry")
        assert (order.idempotency_key, order.developer_user_id) == ("game:retry:o1", "user-1")
        assert order.raw["order"]["amountAtomic"] == "10000"
        read = client.get_order(order.id)
        assert (read.id, read.status, read.amount_atomic) == (order.id, "created", 10_000)
        assert read.payment_url is None  # the lookup names no product route
        assert client.create_order(product_id=product.id, developer_user_id="user-1",
                                   idempotency_key="game:retry:o1").id == order.id
        made = client.create_order(product_id=world.products["credits"].id,
                                   developer_user_id="user-1", amount_atomic=2_500)
        assert made.amount_atomic == 2_500
        assert made.idempotency_key is not None
        assert made.idempotency_key.startswith(f"svc-order:{world.products['credits'].id}:")


def test_delivery_and_receipt_after_a_product_route_payment(world: SdkWorld,
                                                            backend: Connect) -> None:
    paid = world.paid_delivery(wallet(1), "game:retry:d1")
    with backend() as client:
        delivery = client.get_delivery(paid["deliveryId"])
        assert (delivery.id, delivery.charge_id) == (paid["deliveryId"], paid["chargeId"])
        assert delivery.idempotency_key == "svc:game:retry:d1"
        assert (delivery.status, delivery.grantable, delivery.amount_atomic) == (
            "delivered", True, 10_000)
        assert delivery.product_id == world.products["retry"].id
        assert delivery.app_id == world.app.id and delivery.developer_user_id == "user-1"
        assert delivery.wallet_address is not None
        assert delivery.wallet_address.lower() == wallet(1).address.lower()
        assert delivery.settlement_status == "queued" and delivery.delivered_at
        assert client.reconcile_delivery(paid["deliveryId"]) == delivery
        receipt = client.get_receipt(paid["chargeId"])
        assert (receipt.charge_id, receipt.delivery_id) == (paid["chargeId"], paid["deliveryId"])
        assert (receipt.amount_atomic, receipt.payment_path) == (10_000, "product_route")
        assert (receipt.app_slug, receipt.product_slug) == (world.app.slug, "retry")
        assert receipt.raw["receipt"]["chargeId"] == paid["chargeId"]


def test_a_delivery_is_found_by_the_key_it_was_paid_under(world: SdkWorld,
                                                          backend: Connect) -> None:
    """``get_delivery_by_key``: the delivery of a product-route payment or a trusted charge
    from the key alone; ``None`` only when the service says no delivery has the key."""
    paid = world.paid_delivery(wallet(1), "game:retry:k1")
    connection_id = bound_connection(world, backend, "user-1")
    with backend() as client:
        found = client.get_delivery_by_key("game:retry:k1")
        assert found is not None and found == client.get_delivery(paid["deliveryId"])
        assert found.idempotency_key == "svc:game:retry:k1" and found.grantable
        for app in (world.app.slug, world.app.id):
            assert client.get_delivery_by_key("game:retry:k1", app=app) == found
        charge = client.create_trusted_charge(
            product_id=world.products["relic"].id, account_connection_id=connection_id,
            developer_user_id="user-1", idempotency_key="game:relic:k2")
        relic = client.get_delivery_by_key("game:relic:k2")
        assert relic is not None and relic.id == charge.delivery.id
        assert not relic.grantable  # settled_first: paid, granted once settled
        assert client.get_delivery_by_key("game:retry:never") is None  # nothing charged
        # Every other refusal raises: it says nothing about the key.
        with pytest.raises(BackendError) as unseen:
            client.get_delivery_by_key("game:retry:k1", app="no-such-app")
        assert (unseen.value.status, unseen.value.code) == (404, "not_found")
        with pytest.raises(BackendError) as delivery_form:
            client.get_delivery_by_key("svc:game:retry:k1")
        assert (delivery_form.value.status, delivery_form.value.code) == (
            422, "invalid_idempotency_key")
        with pytest.raises(ValueError, match="the key the purchase was sent with"):
            client.get_delivery_by_key(" ")
    org_key = _org_key(world)
    with backend(key=org_key) as client:
        with pytest.raises(BackendError) as unnamed:
            client.get_delivery_by_key("game:retry:k1")
        assert (unnamed.value.status, unnamed.value.body["field"]) == (422, "app")
        assert client.get_delivery_by_key("game:retry:k1", app=world.app.slug) == found


def test_a_server_without_the_lookup_by_key_is_not_read_as_nothing_charged(
        world: SdkWorld, backend: Connect) -> None:
    """A 404 ``not_found`` that is not the lookup's own (an older service, a wrong URL)
    raises: read as ``None`` it would tell a paying user to buy again."""
    world.paid_delivery(wallet(1), "game:retry:k1")
    with backend(url=world.router.url + "/v0") as client, \
            pytest.raises(BackendError) as missing:
        client.get_delivery_by_key("game:retry:k1")
    assert (missing.value.status, missing.value.code) == (404, "not_found")


def test_handoff_needs_a_connection_then_is_ready(world: SdkWorld, backend: Connect) -> None:
    request: dict[str, Any] = {
        "app_slug": world.app.slug, "merchant_user_id": "merchant-9",
        "game_account_label": "Player Nine", "return_url": f"{world.portal}/{world.app.slug}"}
    with backend() as client:
        first = client.create_account_handoff(**request)
        assert (first.status, first.connection, first.authorization) == (
            "needs_connection", None, None)
        assert first.portal_url.startswith(f"{world.portal}/authorize?")
        assert (first.app_slug, first.game_account_label) == (world.app.slug, "Player Nine")
        world.authorize(wallet(3), 50_000, handoff=handoff_token(first.portal_url))
        ready = client.create_account_handoff(**request, email_hint="p9@example.com")
    assert ready.status == "ready" and ready.authorization is not None
    assert isinstance(ready.connection, Connection)
    assert ready.connection.owner_wallet == wallet(3).address.lower()
    assert (ready.connection.status, ready.connection.budget_remaining) == ("active", 50_000)
    code = ready.authorization["authorizationCode"]
    assert code.startswith("sum_") and code in str(ready.raw)
    safe = ready.client_safe()
    assert code not in repr(ready) and code not in str(safe) and "authorization" not in safe
    assert set(safe["handoff"]) == set(HANDOFF_FIELDS)
    assert safe["connection"]["id"] == ready.connection.id


def test_trusted_charge_returns_a_verified_proof(world: SdkWorld, backend: Connect) -> None:
    connection_id = bound_connection(world, backend, "user-1")
    product = world.products["boost"]
    with backend() as client:
        charge = client.create_trusted_charge(
            product_id=product.id, developer_user_id="user-1",
            account_connection_id=connection_id, idempotency_key="game:boost:t1")
        assert charge.proof == client.verify_payment_proof(charge.raw["paymentProof"])
        assert charge.proof["chargeId"] == charge.charge_id == charge.delivery.charge_id
        assert (charge.proof["accountConnectionId"], charge.proof["productId"]) == (
            connection_id, product.id)
        assert (charge.amount_atomic, charge.remaining) == (10_000, 90_000)
        assert charge.idempotency_key == "game:boost:t1"
        assert charge.delivery.idempotency_key == "svc:game:boost:t1"
        assert charge.delivery.grantable and charge.delivery.developer_user_id == "user-1"
        assert charge.status == charge.delivery.status == charge.proof["deliveryStatus"] == (
            "delivered")
        assert charge.proof["riskMode"] == "optimistic"
        looked_up = client.get_delivery(charge.delivery.id)
        assert (looked_up.charge_id, looked_up.amount_atomic) == (charge.charge_id, 10_000)
        assert client.get_receipt(charge.charge_id).payment_path == "trusted_server"
        again = client.create_trusted_charge(
            product_id=product.id, developer_user_id="user-1",
            account_connection_id=connection_id, idempotency_key="game:boost:t1")
        assert again.charge_id == charge.charge_id  # a replay, not a second charge
        with pytest.raises(BackendError) as refused:
            client.create_trusted_charge(product_id=world.products["retry"].id,
                                         account_connection_id=connection_id,
                                         developer_user_id="user-1")
        assert (refused.value.status, refused.value.code) == (403, "TRUSTED_CHARGE_NOT_ALLOWED")
        assert refused.value.idempotency_key is not None
        assert refused.value.idempotency_key.startswith("svc-charge:")


def test_a_settled_first_charge_is_not_grantable_from_its_proof(
        world: SdkWorld, backend: Connect) -> None:
    connection_id = bound_connection(world, backend, "user-1")
    with backend() as client:
        charge = client.create_trusted_charge(
            product_id=world.products["relic"].id, developer_user_id="user-1",
            account_connection_id=connection_id, idempotency_key="game:relic:t1")
        assert (charge.proof["riskMode"], charge.proof["deliveryStatus"]) == (
            "settled_first", "awaiting_settlement")
        assert charge.status == charge.delivery.status == "awaiting_settlement"
        assert not charge.delivery.grantable  # paid; fulfilled on payment.delivered
        assert charge.event_id is None
        assert not client.get_delivery(charge.delivery.id).grantable


def test_a_replayed_proof_without_the_status_is_not_grantable(
        world: SdkWorld, backend: Connect) -> None:
    """A charge made before proofs carried ``deliveryStatus``, replayed: its proof still
    verifies but proves no status, so the charge is ``unproven`` and the lookup decides."""
    connection_id = bound_connection(world, backend, "user-1")
    request = {"product_id": world.products["boost"].id, "developer_user_id": "user-1",
               "account_connection_id": connection_id, "idempotency_key": "game:boost:old"}
    with backend() as client:
        first = client.create_trusted_charge(**request)
        make_stored_charge_legacy(world.sessions, world.api_key, "game:boost:old")
        # Spec 4.4's name for the helper is the same call: a replay, not a second charge.
        replayed = client.create_trusted_server_charge(**request)
        assert replayed.charge_id == first.charge_id
        assert "deliveryStatus" not in replayed.proof
        assert replayed.status == replayed.delivery.status == STATUS_UNPROVEN
        assert not replayed.delivery.grantable
        assert replayed.raw["status"] == "delivered"  # said, but not signed
        assert client.reconcile_delivery(replayed.delivery.id).grantable


def test_a_charge_for_another_user_than_the_connection_raises(world: SdkWorld,
                                                             backend: Connect) -> None:
    """Ada's connection, Bob named: the service refuses, the SDK raises its code at once
    (no retry: a 409 will not get better) and nothing was charged."""
    connection_id = bound_connection(world, backend, "ada")
    with backend() as client:
        with pytest.raises(BackendError) as mismatch:
            client.create_trusted_charge(
                product_id=world.products["boost"].id, account_connection_id=connection_id,
                developer_user_id="bob", idempotency_key="game:boost:bob")
        assert (mismatch.value.status, mismatch.value.code) == (409,
                                                                "ACCOUNT_CONNECTION_MISMATCH")
        assert not mismatch.value.retryable
        assert mismatch.value.idempotency_key == "game:boost:bob"
        assert "another user" in mismatch.value.message
        assert str(mismatch.value).startswith("ACCOUNT_CONNECTION_MISMATCH: ")
        charged = client.create_trusted_charge(
            product_id=world.products["boost"].id, account_connection_id=connection_id,
            developer_user_id="ada", idempotency_key="game:boost:ada")
    assert charged.delivery.developer_user_id == "ada"
    assert charged.remaining == 90_000  # charged once: the refusal took nothing


def test_a_proof_signed_with_another_key_is_refused(world: SdkWorld,
                                                    backend: Connect) -> None:
    """Another key of the same app charges; this client's key cannot verify its proof."""
    connection_id = bound_connection(world, backend, "merchant-2")
    with backend() as client:
        charge = client.create_trusted_charge(product_id=world.products["boost"].id,
                                              account_connection_id=connection_id,
                                              developer_user_id="merchant-2")
    other = backend(key=_key(world, ["deliveries:read"]))
    with pytest.raises(ProofError, match="does not match"):
        other.verify_payment_proof(charge.raw["paymentProof"])


def _key(world: SdkWorld, scopes: list[str]) -> str:
    with transaction(world.sessions) as session:
        assert world.app.organization_id is not None
        secret: str = create_key(session, organization_id=world.app.organization_id,
                                 app_id=world.app.id, label="narrow", scopes=scopes,
                                 environment="test", created_by=None, now=utcnow()).secret
    return secret


def _org_key(world: SdkWorld) -> str:
    with transaction(world.sessions) as session:
        assert world.app.organization_id is not None
        secret: str = create_key(session, organization_id=world.app.organization_id,
                                 app_id=None, label="org", scopes=["deliveries:read"],
                                 environment="test", created_by=None, now=utcnow()).secret
    return secret


def test_errors_carry_the_spec_codes_and_never_the_key(world: SdkWorld,
                                                       backend: Connect) -> None:
    unknown = "zpk_" + "7" * 40
    with backend(key=unknown) as client, pytest.raises(BackendError) as no_key:
        client.get_delivery("ztdlv_anything")
    assert (no_key.value.status, no_key.value.code) == (401, "valid_api_key_required")
    assert not no_key.value.retryable
    narrow = _key(world, ["deliveries:read"])
    with backend(key=narrow) as client:
        with pytest.raises(BackendError) as no_scope:
            client.create_order(product_id=world.products["retry"].id,
                                developer_user_id="user-1")
        with pytest.raises(BackendError) as missing:
            client.get_delivery("ztdlv_nope")
    assert (no_scope.value.status, no_scope.value.code) == (403, "api_key_scope_missing")
    assert no_scope.value.body["scope"] == "orders:create"
    assert (missing.value.status, missing.value.code) == (404, "not_found")
    with backend() as client:
        for lookup in (lambda: client.get_order("zord_nope"),
                       lambda: client.get_receipt("0x" + "f" * 64)):
            with pytest.raises(BackendError) as absent:
                lookup()
            assert absent.value.status == 404 and absent.value.message
        with pytest.raises(BackendError) as invalid:
            client.create_order(product_id=world.products["retry"].id,
                                developer_user_id="user-1", amount_atomic=5)
    assert (invalid.value.status, invalid.value.code) == (422, "invalid_amount")
    for error, secret in ((no_key.value, unknown), (no_scope.value, narrow),
                          (missing.value, narrow), (invalid.value, world.api_key)):
        shown = f"{error} {error!r} {error.body} {error.message}"
        assert secret not in shown and error.code is not None and error.code in str(error)
    for secret in (unknown, narrow, world.api_key):
        assert secret not in repr(backend(key=secret))
