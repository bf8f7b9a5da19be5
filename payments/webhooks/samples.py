"""Test webhooks (spec 2.1, 6 item 7): a ``payment.delivered``-shaped event with
``test: true`` and a ``webhook-test:`` idempotency key. No charge or delivery row exists
for it; its ``deliveryId`` is a fresh ``ztdlv_`` id that no lookup will find."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from payments.chain.params import ChainParams
from payments.ids import IdPrefix, new_id
from payments.ledger.views import CURRENCY, PAYMENT_MODE
from payments.models import App, Product, ProductStatus

TEST_KEY_PREFIX = "webhook-test:"


def _iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def test_event_payload(session: Session, app: App, params: ChainParams,
                       now: datetime) -> dict[str, Any]:
    """The body of a test event, shaped by the app's first active product (or a stand-in
    when it has none yet)."""
    event_id = new_id(IdPrefix.EVENT)
    product = session.scalar(select(Product).where(
        Product.app_id == app.id, Product.status == ProductStatus.ACTIVE)
        .order_by(Product.created_at).limit(1))
    price = str(product.price_atomic) if product is not None else "10000"
    product_view = {
        "id": product.id if product else "zprod_test", "slug": product.slug if product else "test",
        "name": product.name if product else "Test product", "priceAtomic": price,
        "currency": CURRENCY, "network": params.network, "paymentPath": "webhook_test",
    }
    delivery_id = new_id(IdPrefix.DELIVERY)
    return {
        "id": event_id, "type": "payment.delivered", "test": True, "createdAt": _iso(now),
        "app": {"id": app.id, "slug": app.slug, "name": app.name,
                "environment": app.environment, "payTo": app.pay_to},
        "product": product_view,
        # No payment stands behind a test event on any chain: it is always simulated.
        "payment": {"mode": PAYMENT_MODE, "simulated": True, "settlementStatus": "queued",
                    "traceId": None, "budgetSpender": params.spender, "payTo": app.pay_to},
        "delivery": {
            "deliveryId": delivery_id, "idempotencyKey": TEST_KEY_PREFIX + event_id,
            "status": "delivered", "fulfilled": False, "chargeId": None, "appId": app.id,
            "productId": product_view["id"], "itemId": product.sku if product else None,
            "developerUserId": None, "walletAddress": None, "paymentMode": PAYMENT_MODE,
            "network": params.network, "amount": price, "payTo": app.pay_to,
            "settlementStatus": "queued", "settlementTxHash": None, "deliveredAt": _iso(now),
        },
    }
