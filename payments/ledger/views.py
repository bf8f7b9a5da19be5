"""Wire shapes of ledger objects: deliveries, receipts and the webhook event of spec 2.1."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from payments.chain.params import ChainParams
from payments.ids import charge_id
from payments.ledger.models import Charge, Delivery, WebhookEvent
from payments.models import App, Product

PAYMENT_MODE = "budget-spender"
CURRENCY = "USDC"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def delivery_view(delivery: Delivery, charge: Charge, product: Product,
                  params: ChainParams) -> dict[str, Any]:
    view: dict[str, Any] = {
        "deliveryId": delivery.id, "idempotencyKey": delivery.idempotency_key,
        "status": delivery.status.value, "fulfilled": delivery.fulfilled,
        "chargeId": charge_id(charge.seq), "appId": delivery.app_id,
        "productId": delivery.product_id, "itemId": product.sku,
        "developerUserId": delivery.developer_user_id, "walletAddress": delivery.wallet_address,
        "paymentMode": PAYMENT_MODE, "network": params.network,
        "amount": str(charge.amount_atomic), "payTo": charge.pay_to,
        "settlementStatus": charge.settlement_status.value,
        "settlementTxHash": charge.settlement_tx_hash,
        "deliveredAt": _iso(delivery.delivered_at),
    }
    if delivery.order_id is not None:  # present only when linked to an order (spec 2.1)
        view["orderId"] = delivery.order_id
    return view


def event_payload(event_id: str, event_type: str, created_at: datetime, app: App,
                  product: Product, charge: Charge, delivery: Delivery, params: ChainParams,
                  *, test: bool = False) -> dict[str, Any]:
    return {
        "id": event_id, "type": event_type, "test": test, "createdAt": _iso(created_at),
        "app": {"id": app.id, "slug": app.slug, "name": app.name,
                "environment": app.environment, "payTo": app.pay_to},
        "product": {"id": product.id, "slug": product.slug, "name": product.name,
                    "priceAtomic": str(charge.amount_atomic), "currency": CURRENCY,
                    "network": params.network, "paymentPath": charge.source},
        "payment": {"mode": PAYMENT_MODE, "simulated": params.simulated,
                    "settlementStatus": charge.settlement_status.value, "traceId": None,
                    "budgetSpender": params.spender, "payTo": charge.pay_to},
        "delivery": delivery_view(delivery, charge, product, params),
    }


def receipt_view(charge: Charge, delivery: Delivery, app: App, product: Product,
                 params: ChainParams) -> dict[str, Any]:
    return {
        "chargeId": charge_id(charge.seq), "amountAtomic": str(charge.amount_atomic),
        "currency": CURRENCY, "network": params.network, "simulated": params.simulated,
        "payTo": charge.pay_to, "ownerWallet": charge.owner_wallet,
        "budgetSpender": params.spender, "settlementStatus": charge.settlement_status.value,
        "settlementTxHash": charge.settlement_tx_hash, "createdAt": _iso(charge.created_at),
        "settledAt": _iso(charge.settled_at), "deliveryId": delivery.id,
        "orderId": charge.order_id, "paymentPath": charge.source,
        "app": {"id": app.id, "slug": app.slug, "name": app.name},
        "product": {"id": product.id, "slug": product.slug, "name": product.name},
    }


def event_view(event: WebhookEvent) -> dict[str, Any]:
    return dict(event.payload)
