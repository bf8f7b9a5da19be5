"""The pure parts: the retry schedule, the signature both sides compute, header values,
sealed secrets, and the SDK's timestamp and shape checks."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest

from payments.ledger.models import AttemptStatus
from payments.webhooks.schedule import DEFAULT_DELAYS, UNREACHABLE, Outcome, RetrySchedule
from payments.webhooks.signing import event_body, header_value, request_headers, signature
from payments.webhooks.signing_secrets import SecretBox, SecretUnreadable, new_signing_secret
from svc.webhooks import (
    WebhookVerificationError,
    parse_event,
    sign_webhook,
    verify_signature,
    verify_webhook,
)

NOW = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
SECRET = "zwhsec_" + "a" * 64


def event() -> dict[str, object]:
    return {
        "id": "zevt_1", "type": "payment.delivered", "test": False,
        "createdAt": "2026-11-22T10:00:00Z",
        "app": {"id": "zapp_1", "slug": "game", "name": "Game"},
        "product": {"id": "zprod_1", "slug": "retry", "name": "Retry", "priceAtomic": "10000",
                    "currency": "USDC", "network": "base-sepolia"},
        "payment": {"mode": "budget-spender", "settlementStatus": "queued"},
        "delivery": {"deliveryId": "ztdlv_1", "idempotencyKey": "svc:ké\ny",
                     "status": "delivered", "fulfilled": False, "amount": "10000",
                     "deliveredAt": "2026-11-22T10:00:00Z"},
    }


def test_schedule_is_architecture_md() -> None:
    schedule = RetrySchedule()
    assert schedule.delays == DEFAULT_DELAYS == (5, 300, 1800, 7200, 18000, 36000, 36000)
    assert schedule.max_requests == 8
    failed = Outcome(503)
    waits = []
    for n in range(1, 8):
        step = schedule.after(failed, n, NOW)
        assert step.status == AttemptStatus.PENDING
        waits.append((step.next_attempt_at - NOW).total_seconds())
    assert waits == [5, 300, 1800, 7200, 18000, 36000, 36000]
    assert schedule.after(failed, 8, NOW).status == AttemptStatus.FAILED
    assert schedule.after(Outcome(204), 3, NOW).status == AttemptStatus.DELIVERED
    for status in (301, 401, 404, 429, UNREACHABLE):  # everything but 2xx is retried
        assert schedule.after(Outcome(status), 1, NOW).status == AttemptStatus.PENDING
    assert schedule.after(Outcome(None, "url_refused:x", contacted=False), 1,
                          NOW).next_attempt_at == NOW + timedelta(seconds=5)
    with pytest.raises(ValueError, match="negative"):
        RetrySchedule((-1,))


def test_service_and_sdk_agree_on_the_signature() -> None:
    body = event_body(event())
    headers = request_headers(event(), body, SECRET, NOW)
    assert headers["x-svc-timestamp"] == "2026-11-22T10:00:00Z"
    assert headers["x-svc-signature"] == signature(SECRET, headers["x-svc-timestamp"], body)
    assert headers["x-svc-signature"] == sign_webhook(body, headers["x-svc-timestamp"], SECRET)
    # The key may hold any character; the header carries it percent-encoded, the body exactly.
    assert headers["x-svc-idempotency-key"] == "svc:k%C3%A9%0Ay"
    assert header_value("svc:plain-key_1") == "svc:plain-key_1"
    assert header_value("50%") == "50%25"
    parsed = verify_webhook(body, headers["x-svc-timestamp"], headers["x-svc-signature"],
                            SECRET, now=NOW.timestamp() + 10)
    assert parsed.delivery.idempotency_key == "svc:ké\ny"
    assert parsed.product.price_atomic == 10000 and parsed.delivery.amount_atomic == 10000
    assert json.loads(body) == event()


def test_sdk_refuses_stale_future_malformed_and_wrong_secret() -> None:
    body = event_body(event())
    stamp = "2026-11-22T10:00:00Z"
    good = sign_webhook(body, stamp, SECRET)
    at = NOW.timestamp()
    verify_signature(body, stamp, good, SECRET, now=at + 299)
    for now in (at + 301, at - 301):
        with pytest.raises(WebhookVerificationError, match="300 s"):
            verify_signature(body, stamp, good, SECRET, now=now)
    bad_cases = [
        (body, stamp, good, "zwhsec_" + "b" * 64),  # another secret
        (body, "2026-11-22T10:00:01Z", good, SECRET),  # another timestamp
        (body + b" ", stamp, good, SECRET),  # another body
        (body, stamp, good.upper(), SECRET),
        (body, stamp, "sha1=" + good[7:], SECRET),
        (body, stamp, "", SECRET),
        (body, "yesterday", good, SECRET),
        (body, "2026-11-22T10:00:00", good, SECRET),  # no zone
        (body, stamp, good, "not-a-secret"),
    ]
    for case in bad_cases:
        with pytest.raises(WebhookVerificationError):
            verify_signature(*case, now=at)
    with pytest.raises(WebhookVerificationError):
        verify_signature(body, stamp, good, SECRET)  # default clock: 2026 is not now
    for broken in ({}, {**event(), "type": "refund"}, {**event(), "id": "evt_1"},
                   {**event(), "test": "no"}, {**event(), "delivery": []}):
        with pytest.raises(WebhookVerificationError):
            parse_event(broken)
    fresh = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    assert verify_webhook(body, fresh, sign_webhook(body, fresh, SECRET), SECRET).id == "zevt_1"


def test_sealed_secrets() -> None:
    box = SecretBox("server-secret-" + "s" * 30)
    secret = new_signing_secret()
    assert secret.startswith("zwhsec_") and len(secret) == 7 + 64
    sealed = box.seal(secret, "zwh_1")
    assert secret not in sealed and sealed.startswith("v1:")
    assert box.open(sealed, "zwh_1") == secret
    assert box.seal(secret, "zwh_1") != sealed  # a fresh nonce each time
    with pytest.raises(SecretUnreadable):
        box.open(sealed, "zwh_2")  # bound to its endpoint
    with pytest.raises(SecretUnreadable):
        SecretBox("another-server-secret-" + "t" * 30).open(sealed, "zwh_1")
