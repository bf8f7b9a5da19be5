"""The backend API's requests, built once for the sync and the async client (spec 4.2-4.5).

Each method of the clients is one :class:`Call`: what to send, how to read a 2xx answer
and, for the rare refusal that is an answer, that too. The clients only do the I/O and
the retries.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote, urlencode

from svc.backend_errors import BackendError
from svc.backend_models import Delivery, Handoff, Order, Receipt, TrustedCharge

T = TypeVar("T")

MAX_IDEMPOTENCY_KEY = 200  # the service's limit (docs/payments.md, Idempotency)


def new_idempotency_key(prefix: str, product_slug: str) -> str:
    """``<prefix>:<product-slug>:<uuid4>`` (spec 4.1): one new key per purchase.

    Save it with the pending purchase before paying, and send it again for every retry of
    that purchase: the service then answers the first result instead of charging again.
    """
    key = f"{prefix}:{product_slug}:{uuid.uuid4()}"
    if not prefix or not product_slug or len(key) > MAX_IDEMPOTENCY_KEY:
        raise ValueError("new_idempotency_key() needs a prefix and a product slug, together "
                         f"short enough for a key of at most {MAX_IDEMPOTENCY_KEY} characters.")
    return key


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    read: Callable[[dict[str, Any]], T]
    body: dict[str, Any] | None = None
    # The body's idempotency key, if it has one: the same on every attempt.
    idempotency_key: str | None = None
    # How to read a refusal that is an answer (returns one) rather than a failure (raises
    # it); without it, every refusal raises.
    refusal: Callable[[BackendError], T] | None = None


def _segment(value: str) -> str:
    if not value:
        raise ValueError("An id must not be empty.")
    return quote(value, safe="")


def _present(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


def create_order(*, product_id: str, developer_user_id: str, idempotency_key: str | None,
                 amount_atomic: int | None) -> Call[Order]:
    key = idempotency_key or new_idempotency_key("svc-order", product_id)
    body = _present(productId=product_id, developerUserId=developer_user_id,
                    idempotencyKey=key,
                    amountAtomic=None if amount_atomic is None else str(amount_atomic))
    return Call("POST", "/api/orders", Order.from_answer, body, key)


def get_order(order_id: str) -> Call[Order]:
    return Call("GET", f"/api/orders/{_segment(order_id)}", Order.from_answer)


def get_delivery(delivery_id: str) -> Call[Delivery]:
    return Call("GET", f"/api/deliveries/{_segment(delivery_id)}", Delivery.from_answer)


def get_delivery_by_key(idempotency_key: str, app: str | None) -> Call[Delivery | None]:
    if not isinstance(idempotency_key, str) or not idempotency_key.strip():
        raise ValueError("idempotency_key must be the key the purchase was sent with.")
    query = urlencode(_present(idempotencyKey=idempotency_key, app=app))

    def none_under_key(error: BackendError) -> Delivery | None:
        # Only the lookup's own "no delivery under this key" (it echoes the key) means
        # nothing was charged; the bare not_found of a server without this route must
        # not read as that.
        if (error.status, error.code) == (404, "not_found") and \
                error.body.get("idempotencyKey") == idempotency_key:
            return None
        raise error
    return Call("GET", f"/api/deliveries?{query}", Delivery.from_answer,
                refusal=none_under_key)


def get_receipt(charge_id: str) -> Call[Receipt]:
    return Call("GET", f"/api/receipts/{_segment(charge_id)}", Receipt.from_answer)


def create_account_handoff(*, app_slug: str, merchant_user_id: str, game_account_label: str,
                           return_url: str, email_hint: str | None,
                           wallet_hint: str | None) -> Call[Handoff]:
    # No idempotency key: the service takes none here, and a handoff moves no money (a
    # retry at most issues one more short-lived summary code).
    body = _present(appSlug=app_slug, merchantUserId=merchant_user_id,
                    gameAccountLabel=game_account_label, returnUrl=return_url,
                    emailHint=email_hint, walletHint=wallet_hint)
    return Call("POST", "/api/account-handoffs", Handoff.from_answer, body)


def create_trusted_charge(*, product_id: str, developer_user_id: str | None,
                          account_connection_id: str, idempotency_key: str | None,
                          order_id: str | None, api_key: str) -> Call[TrustedCharge]:
    key = idempotency_key or new_idempotency_key("svc-charge", product_id)
    body = _present(productId=product_id, developerUserId=developer_user_id,
                    accountConnectionId=account_connection_id, idempotencyKey=key,
                    orderId=order_id)

    def read(answer: dict[str, Any]) -> TrustedCharge:
        return TrustedCharge.from_answer(answer, api_key, key)
    return Call("POST", "/api/charges", read, body, key)
