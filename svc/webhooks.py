"""Verify a webhook from the service and read it as a typed event (spec 1.4 item 4, 5.6, 6).

    event = verify_webhook(raw_body=request_body_bytes,
                           timestamp=headers["x-svc-timestamp"],
                           signature=headers["x-svc-signature"],
                           signing_secret=os.environ["SVC_WEBHOOK_SECRET"])
    grant_once(event.delivery.delivery_id, event.delivery.idempotency_key, ...)

The signature is ``"sha256=" + hex(HMAC-SHA256(signing_secret, timestamp + "." +
raw_body))`` with the whole ``zwhsec_...`` secret as the key (UTF-8). Verify the raw
bytes as received: a body parsed and serialized again is not the same bytes. Timestamps
more than ``tolerance`` seconds (5 minutes) from now are refused, so a captured request
cannot be replayed later. Answer 401 on :class:`WebhookVerificationError`, and 2xx only
after fulfilling idempotently by ``delivery_id``/``idempotency_key`` (retries and manual
retries reuse the event id and deliver the same delivery again).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from svc.amounts import is_atomic_text

DEFAULT_TOLERANCE = 300.0
EVENT_TYPES = ("payment.delivered", "payment.settled", "delivery.created")
_SIGNATURE_RE = re.compile(r"^sha256=[0-9a-f]{64}\Z")


class WebhookVerificationError(ValueError):
    """Not a genuine, fresh webhook of this endpoint: answer 401 and grant nothing."""


@dataclass(frozen=True)
class WebhookApp:
    id: str
    slug: str
    name: str
    environment: str | None
    pay_to: str | None


@dataclass(frozen=True)
class WebhookProduct:
    id: str
    slug: str
    name: str
    price_atomic: int  # USDC atomic units (6 decimals)
    currency: str
    network: str
    payment_path: str | None


@dataclass(frozen=True)
class WebhookPayment:
    mode: str
    settlement_status: str
    simulated: bool | None
    budget_spender: str | None
    pay_to: str | None


@dataclass(frozen=True)
class WebhookDelivery:
    delivery_id: str
    idempotency_key: str  # the grant key: fulfil once per key
    status: str
    fulfilled: bool
    charge_id: str | None
    order_id: str | None
    developer_user_id: str | None
    wallet_address: str | None
    amount_atomic: int | None
    settlement_status: str | None
    settlement_tx_hash: str | None
    delivered_at: datetime | None


@dataclass(frozen=True)
class WebhookEvent:
    id: str  # zevt_...; the same on every retry of this event
    type: str  # payment.delivered | payment.settled | delivery.created
    test: bool  # a console/CLI test event: no charge, no delivery row; never grant
    created_at: datetime
    app: WebhookApp
    product: WebhookProduct
    payment: WebhookPayment
    delivery: WebhookDelivery
    raw: dict[str, Any]  # the whole parsed body, with any fields added later


def sign_webhook(raw_body: bytes, timestamp: str, signing_secret: str) -> str:
    """The ``x-svc-signature`` value for a body and timestamp (for tests of receivers)."""
    message = timestamp.encode("utf-8") + b"." + raw_body
    return "sha256=" + hmac.new(signing_secret.encode("utf-8"), message,
                                hashlib.sha256).hexdigest()


def verify_signature(raw_body: bytes | str, timestamp: str, signature: str,
                     signing_secret: str, *, tolerance: float = DEFAULT_TOLERANCE,
                     now: float | None = None) -> None:
    """Raise :class:`WebhookVerificationError` unless the signature and timestamp hold."""
    if not isinstance(signing_secret, str) or not signing_secret.startswith("zwhsec_"):
        raise WebhookVerificationError("A zwhsec_ signing secret is needed to verify webhooks.")
    body = raw_body.encode("utf-8") if isinstance(raw_body, str) else bytes(raw_body)
    if not isinstance(signature, str) or not _SIGNATURE_RE.match(signature.strip()):
        raise WebhookVerificationError("x-svc-signature is missing or not 'sha256=<64 hex>'.")
    sent_at = _parse_time(timestamp, "x-svc-timestamp")
    current = time.time() if now is None else now
    if abs(current - sent_at.timestamp()) > tolerance:
        raise WebhookVerificationError(f"x-svc-timestamp is more than {tolerance:g} s from "
                                       "now: a replay, or this server's clock is off.")
    expected = sign_webhook(body, timestamp, signing_secret)
    if not hmac.compare_digest(expected.encode("ascii"), signature.strip().encode("ascii")):
        raise WebhookVerificationError("x-svc-signature does not match: the body or timestamp "
                                       "changed, or another secret signed it.")


def verify_webhook(raw_body: bytes | str, timestamp: str, signature: str,
                   signing_secret: str, *, tolerance: float = DEFAULT_TOLERANCE,
                   now: float | None = None) -> WebhookEvent:
    """Verify, then parse: the event, or :class:`WebhookVerificationError`."""
    verify_signature(raw_body, timestamp, signature, signing_secret, tolerance=tolerance,
                     now=now)
    try:
        body = json.loads(raw_body)
    except (UnicodeDecodeError, ValueError):
        raise WebhookVerificationError("The signed body is not JSON.") from None
    return parse_event(body)


def parse_event(body: Any) -> WebhookEvent:
    """A verified body as a typed event (spec 2.1); unknown extra fields are kept in ``raw``."""
    if not isinstance(body, dict):
        raise WebhookVerificationError("The event is not a JSON object.")
    app, product = _obj(body, "app"), _obj(body, "product")
    payment, delivery = _obj(body, "payment"), _obj(body, "delivery")
    event_type = _str(body, "type")
    if event_type not in EVENT_TYPES:
        raise WebhookVerificationError(f"Unknown event type {event_type!r}.")
    event_id = _str(body, "id")
    if not event_id.startswith("zevt_"):
        raise WebhookVerificationError("The event id is not a zevt_ id.")
    if not isinstance(body.get("test"), bool):
        raise WebhookVerificationError("The event's 'test' is not a boolean.")
    return WebhookEvent(
        id=event_id, type=event_type, test=body["test"],
        created_at=_parse_time(_str(body, "createdAt"), "createdAt"),
        app=WebhookApp(id=_str(app, "id"), slug=_str(app, "slug"), name=_str(app, "name"),
                       environment=_opt(app, "environment"), pay_to=_opt(app, "payTo")),
        product=WebhookProduct(
            id=_str(product, "id"), slug=_str(product, "slug"), name=_str(product, "name"),
            price_atomic=_atomic(_str(product, "priceAtomic"), "product.priceAtomic"),
            currency=_str(product, "currency"), network=_str(product, "network"),
            payment_path=_opt(product, "paymentPath")),
        payment=WebhookPayment(
            mode=_str(payment, "mode"), settlement_status=_str(payment, "settlementStatus"),
            simulated=payment.get("simulated") if isinstance(payment.get("simulated"), bool)
            else None, budget_spender=_opt(payment, "budgetSpender"),
            pay_to=_opt(payment, "payTo")),
        delivery=WebhookDelivery(
            delivery_id=_str(delivery, "deliveryId"),
            idempotency_key=_str(delivery, "idempotencyKey"), status=_str(delivery, "status"),
            fulfilled=delivery.get("fulfilled") is True, charge_id=_opt(delivery, "chargeId"),
            order_id=_opt(delivery, "orderId"),
            developer_user_id=_opt(delivery, "developerUserId"),
            wallet_address=_opt(delivery, "walletAddress"),
            amount_atomic=(None if _opt(delivery, "amount") is None
                           else _atomic(_str(delivery, "amount"), "delivery.amount")),
            settlement_status=_opt(delivery, "settlementStatus"),
            settlement_tx_hash=_opt(delivery, "settlementTxHash"),
            delivered_at=(None if _opt(delivery, "deliveredAt") is None else
                          _parse_time(_str(delivery, "deliveredAt"), "deliveredAt"))),
        raw=body)


def _obj(body: dict[str, Any], name: str) -> dict[str, Any]:
    value = body.get(name)
    if not isinstance(value, dict):
        raise WebhookVerificationError(f"The event has no '{name}' object.")
    return value


def _str(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str):
        raise WebhookVerificationError(f"The event's '{name}' is missing or not a string.")
    return value


def _opt(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    return value if isinstance(value, str) else None


def _atomic(text: str, name: str) -> int:
    if not is_atomic_text(text):
        raise WebhookVerificationError(f"'{name}' is not an integer string.")
    return int(text)


def _parse_time(text: str, name: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        raise WebhookVerificationError(f"'{name}' is not an ISO 8601 time.") from None
    if value.tzinfo is None:
        raise WebhookVerificationError(f"'{name}' has no time zone.")
    return value
