"""Grants from each trusted source, all through the store's one ``grant_once``.

Trusted sources only (spec 1.4): a signed webhook, a delivery looked up with the app's own
key, or a ``paymentProof`` verified with that key whose ``deliveryStatus`` is ``delivered``
(``routes_grants`` decides; other proofs are looked up). A delivery of another app (an
organization key sees several) is refused; one that is not ``delivered`` yet (a
``settled_first`` product before settlement) grants nothing.
"""

from __future__ import annotations

from typing import Any

from examples.reference_app.context import AppContext
from examples.reference_app.errors import AppError
from examples.reference_app.store import Grant
from svc.backend import Delivery
from svc.webhooks import WebhookEvent


def from_event(event: WebhookEvent) -> Grant:
    d = event.delivery
    return Grant(delivery_id=d.delivery_id, idempotency_key=d.idempotency_key,
                 developer_user_id=d.developer_user_id, product_id=event.product.id,
                 product_slug=event.product.slug,
                 amount_atomic=d.amount_atomic if d.amount_atomic is not None
                 else event.product.price_atomic,
                 source="webhook", event_id=event.id)


def from_delivery(context: AppContext, delivery: Delivery, source: str) -> Grant:
    if delivery.app_id is not None and delivery.app_id != context.settings.app_id:
        raise AppError("delivery_not_found", 404, "No delivery with this id for this app.")
    if not delivery.grantable:
        raise AppError("delivery_not_ready", 409, "The delivery is not ready to fulfil yet "
                       f"(status {delivery.status}); it is granted when it is.",
                       deliveryId=delivery.id, deliveryStatus=delivery.status,
                       retryable=True)
    product_id = delivery.product_id or ""
    return Grant(delivery_id=delivery.id, idempotency_key=delivery.idempotency_key,
                 developer_user_id=delivery.developer_user_id, product_id=product_id,
                 product_slug=context.catalogue.slug_of(product_id),
                 amount_atomic=delivery.amount_atomic, source=source)


def from_proof(context: AppContext, payload: dict[str, Any]) -> Grant:
    """A verified ``paymentProof`` payload (``svc.proofs``); grant it only when
    ``proof_grantable`` (the caller checks)."""
    if payload.get("appId") != context.settings.app_id:
        raise AppError("payment_proof_invalid", 422, "The paymentProof is for another app.")
    try:
        delivery_id, key = str(payload["deliveryId"]), str(payload["idempotencyKey"])
        product_id = str(payload["productId"])
        amount = int(str(payload["amountAtomic"]))
    except (KeyError, ValueError):
        raise AppError("payment_proof_invalid", 422, "The paymentProof payload lacks a "
                       "field.") from None
    user = payload.get("developerUserId")
    return Grant(delivery_id=delivery_id, idempotency_key=key,
                 developer_user_id=str(user) if user is not None else None,
                 product_id=product_id, product_slug=context.catalogue.slug_of(product_id),
                 amount_atomic=amount, source="proof")


async def grant(context: AppContext, candidate: Grant) -> dict[str, Any]:
    stored, created = await context.in_store(context.fulfilment.grant_once, candidate)
    return {"status": "granted", "granted": created, "grant": stored.view()}
