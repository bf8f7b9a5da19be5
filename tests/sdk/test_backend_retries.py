"""Safe retries over a real network fault: a loopback proxy between the client and the
real service loses answers after the service handled the request, or changes them.
The client sends the same idempotency key on every attempt, so a lost answer never
becomes a second charge; it never retries a refusal; a changed proof is never trusted."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from payments.ledger.models import Charge, Order
from svc.backend import BackendError, ProofError, ServiceUnreachable
from tests.sdk.conftest import Connect, SdkWorld
from tests.sdk.proxy import body_of, running_proxy, with_body
from tests.sdk.test_backend_client import bound_connection


def rows(world: SdkWorld, model: type[Charge] | type[Order]) -> int:
    with world.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


def test_a_lost_answer_is_retried_under_the_same_key_and_charges_once(
        world: SdkWorld, backend: Connect) -> None:
    connection_id = bound_connection(world, backend, "user-1")
    with running_proxy(world.router.port,
                       lambda n, request, response: None if n == 0 else response) as proxy:
        charge = backend(url=proxy.url, max_retry_delay=0.5).create_trusted_charge(
            product_id=world.products["boost"].id, account_connection_id=connection_id,
            developer_user_id="user-1")
    assert proxy.statuses == [201, 201]  # the service charged, the answer was lost
    first, second = (json.loads(body) for body in proxy.bodies)
    assert first == second and first["idempotencyKey"] == charge.idempotency_key
    assert charge.idempotency_key.startswith(f"svc-charge:{world.products['boost'].id}:")
    assert rows(world, Charge) == 1
    with world.sessions() as session:
        assert session.scalar(select(Charge.seq)) == int(charge.charge_id, 16)
    assert charge.proof["chargeId"] == charge.charge_id


def test_answers_lost_every_time_leave_the_key_to_retry_with(world: SdkWorld,
                                                             backend: Connect) -> None:
    product_id = world.products["retry"].id
    with running_proxy(world.router.port, lambda n, request, response: None) as proxy:
        client = backend(url=proxy.url, retries=2, max_retry_delay=0.2)
        with pytest.raises(ServiceUnreachable) as lost:
            client.create_order(product_id=product_id, developer_user_id="user-1")
    assert len(proxy.bodies) == 3 and len(set(proxy.bodies)) == 1  # 1 try + 2 retries
    key = lost.value.idempotency_key
    assert key is not None and key == json.loads(proxy.bodies[0])["idempotencyKey"]
    assert world.api_key not in f"{lost.value} {lost.value!r}"
    order = backend().create_order(product_id=product_id, developer_user_id="user-1",
                                   idempotency_key=key)
    assert rows(world, Order) == 1 and order.idempotency_key == key


def test_refusals_are_not_retried(world: SdkWorld, backend: Connect) -> None:
    with running_proxy(world.router.port) as proxy:
        with pytest.raises(BackendError) as missing:
            backend(url=proxy.url).get_delivery("ztdlv_nope")
        with pytest.raises(BackendError) as no_key:
            backend(url=proxy.url, key="zpk_" + "3" * 40).get_order("zord_nope")
        with pytest.raises(BackendError) as invalid:
            backend(url=proxy.url).create_order(product_id=world.products["retry"].id,
                                                developer_user_id="user-1", amount_atomic=5)
    assert [missing.value.code, no_key.value.code, invalid.value.code] == [
        "not_found", "valid_api_key_required", "invalid_amount"]
    assert proxy.statuses == [404, 401, 422]  # one attempt each


def test_a_changed_proof_is_refused(world: SdkWorld, backend: Connect) -> None:
    connection_id = bound_connection(world, backend, "merchant-2")

    def tamper(n: int, request: bytes, response: bytes) -> bytes:
        answer = json.loads(body_of(response))
        if n == 0:  # the signed payload: the signature no longer matches
            answer["paymentProof"]["payload"]["amountAtomic"] = "1"
        else:  # the answer beside an intact proof: it no longer says what was signed
            answer["deliveryId"] = "ztdlv_someone_elses"
        return with_body(response, json.dumps(answer).encode())

    with running_proxy(world.router.port, tamper) as proxy:
        client = backend(url=proxy.url)
        with pytest.raises(ProofError, match="does not match"):
            client.create_trusted_charge(product_id=world.products["boost"].id,
                                         account_connection_id=connection_id,
                                         developer_user_id="merchant-2")
        with pytest.raises(ProofError, match="deliveryId"):
            client.create_trusted_charge(product_id=world.products["boost"].id,
                                         account_connection_id=connection_id,
                                         developer_user_id="merchant-2")
    assert proxy.statuses == [201, 201]


def test_a_settled_first_charge_claimed_delivered_is_refused(world: SdkWorld,
                                                            backend: Connect) -> None:
    connection_id = bound_connection(world, backend, "merchant-3")

    def claim_delivered(n: int, request: bytes, response: bytes) -> bytes:
        answer = json.loads(body_of(response))
        answer["status"] = "delivered"
        if n == 0:  # the signed status too: the signature no longer matches
            answer["paymentProof"]["payload"]["deliveryStatus"] = "delivered"
        return with_body(response, json.dumps(answer).encode())

    with running_proxy(world.router.port, claim_delivered) as proxy:
        client = backend(url=proxy.url)
        for expected in ("does not match", "'status'"):
            with pytest.raises(ProofError, match=expected):
                client.create_trusted_charge(product_id=world.products["relic"].id,
                                             account_connection_id=connection_id,
                                             developer_user_id="merchant-3",
                                             idempotency_key="game:relic:claimed")
    assert proxy.statuses == [201, 201]  # the first charge, then its replay
    assert rows(world, Charge) == 1
