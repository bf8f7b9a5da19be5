"""Events reach a real receiver on loopback: signed, with the headers of spec 6, bodies
valid against the published schema, verified by the SDK helper and granted once."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from payments.schemas import WEBHOOK_EVENT, load_schema, validator
from svc.webhooks import WebhookVerificationError, verify_webhook
from tests.ledger.flow import PayWorld
from tests.webhooks.kit import (
    FaultyReceiver,
    all_settled,
    attempts,
    console,
    create_endpoint,
    developer_of,
    pay,
    receiver,
    wait_until,
)


@pytest.fixture
def hook(world: PayWorld) -> Iterator[FaultyReceiver]:
    with receiver() as faulty, console(world, developer_of(world)) as client:
        created, secret = create_endpoint(client, world.app.slug, faulty.url)
        assert created["id"].startswith("zwh_") and secret.startswith("zwhsec_")
        faulty.secret = secret
        yield faulty


def test_payments_are_delivered_signed_and_granted_once(world: PayWorld,
                                                        hook: FaultyReceiver) -> None:
    deliveries = pay(world, 3)
    wait_until(lambda: len(hook.ledger.grants()) == 3, what="three grants")
    check = validator(load_schema(WEBHOOK_EVENT))
    for request in hook.requests:
        h = request.headers
        event = json.loads(request.body)
        assert list(check.iter_errors(event)) == []
        assert h["x-svc-event"] == event["type"] == "payment.delivered"
        assert h["x-svc-delivery-id"] == event["delivery"]["deliveryId"]
        assert h["x-svc-idempotency-key"] == event["delivery"]["idempotencyKey"]
        assert h["x-svc-signature"].startswith("sha256=")
        parsed = verify_webhook(request.body, h["x-svc-timestamp"], h["x-svc-signature"],
                                hook.secret)
        assert parsed.id == event["id"] and parsed.delivery.delivery_id in deliveries
    wait_until(all_settled(world.sessions), what="attempts recorded")
    rows = attempts(world.sessions)
    assert {a.status.value for a in rows.values()} == {"delivered"}
    assert all(a.signed and a.response_status == 200 and a.attempt_count == 1
               for a in rows.values())


def test_a_changed_byte_fails_verification(world: PayWorld, hook: FaultyReceiver) -> None:
    pay(world, 1)
    wait_until(lambda: len(hook.requests) == 1, what="one request")
    request = hook.requests[0]
    h = request.headers
    for i in range(len(request.body)):
        tampered = bytearray(request.body)
        tampered[i] ^= 0x01
        with pytest.raises(WebhookVerificationError):
            verify_webhook(bytes(tampered), h["x-svc-timestamp"], h["x-svc-signature"],
                           hook.secret)
