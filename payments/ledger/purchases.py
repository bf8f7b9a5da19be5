"""What a product-route payment buys (spec 4.1): its payment code's binding checked against
the request, and the idempotency fingerprint of the purchase.

The fingerprint leaves the code out. A client that lost the answer holds a consumed code,
so its retry under the same key carries a freshly exchanged one; what must be the same is
the purchase the code binds: product, order, the user it grants to, the budget's wallet
and spender, and the account connection. The amount follows from product and order (the
request names none). Decisions over rows already read, and the replay of a stored answer,
which only reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from payments.errors import ApiError
from payments.ledger import codes, idempotency
from payments.ledger.authorizations import current_authorization
from payments.ledger.models import AuthCode, Authorization, CodeKind, IdempotencyRecord, Order
from payments.models import Product


@dataclass(frozen=True)
class PayRequest:
    """The product route's request, as sent (addresses lower-case)."""

    key: str
    code: str
    wallet: str
    spender: str
    developer_user_id: str | None
    order_id: str | None
    connection_id: str | None


def check_binding(record: AuthCode, app_id: str, product_id: str,
                  request: PayRequest) -> None:
    """The request must name what the code was issued for (spec 7)."""
    if record.app_id != app_id or record.product_id != product_id:
        raise ApiError("AUTHORIZATION_CODE_INTENT_MISMATCH", 409, "This payment code was "
                       "issued for another product.")
    if request.order_id != record.order_id:
        raise ApiError("AUTHORIZATION_CODE_INTENT_MISMATCH", 409, "The orderId does not "
                       "match the order this payment code was issued for.")
    if record.idempotency_key is not None and record.idempotency_key != request.key:
        raise ApiError("AUTHORIZATION_CODE_INTENT_MISMATCH", 409, "The idempotencyKey "
                       "differs from the one this payment code was issued for.")
    if request.connection_id is not None and request.connection_id != record.connection_id:
        raise ApiError("ACCOUNT_CONNECTION_MISMATCH", 409, "The accountConnectionId "
                       "differs from the connection of this payment code.")


def check_payer(authorization: Authorization, request: PayRequest) -> None:
    """The headers must name the code's budget: its owner and its spender."""
    if request.wallet != authorization.owner_wallet:
        raise ApiError("WALLET_MISMATCH", 403, "x-wallet-address is not the owner of this "
                       "authorization.")
    if request.spender != authorization.spender:
        raise ApiError("SPENDER_MISMATCH", 403, "x-svc-budget-spender is not this "
                       "authorization's spender.")


def granted_user(request: PayRequest, record: AuthCode, order: Order | None) -> str | None:
    """The developer-side user the delivery goes to: as named, else the code's, else the
    order's; naming another than the code's or the order's is an intent mismatch."""
    user = codes.bound_user(request.developer_user_id, record.developer_user_id,
                            "payment code")
    if order is not None:
        user = codes.bound_user(user, order.developer_user_id, "order")
    return user


def fingerprint(record: AuthCode, authorization: Authorization, user: str | None) -> str:
    """The purchase, for the idempotency record: equal for a retry with another code of
    the same purchase, different for anything that would charge or grant differently."""
    return idempotency.fingerprint({
        "productId": record.product_id, "orderId": record.order_id, "developerUserId": user,
        "ownerWallet": authorization.owner_wallet, "spender": authorization.spender,
        "accountConnectionId": record.connection_id})


def replayed(session: Session, stored: IdempotencyRecord, app_id: str,
             product: Product | None, asked: PayRequest
             ) -> tuple[int, dict[str, Any], str | None]:
    """A key already answered: its stored answer if this request is the same purchase
    (``IDEMPOTENCY_KEY_REUSED`` otherwise), and the origin that may read it.

    The presented code is read, not consumed: a retry after a lost answer carries a fresh
    code (the first one was spent by the charge it never heard of), and a replay charges
    nothing. Expired or consumed, a code still says what it was for. The answer is
    readable by that code's audience only."""
    record = codes.find(session, CodeKind.PAYMENT, asked.code)
    if record is None:
        raise ApiError("AUTHORIZATION_CODE_INVALID", 401, "Unknown payment code; exchange the "
                       "summary code for a new one.")
    if product is None:
        raise ApiError("product_not_found", 404, "No such product in this app.")
    check_binding(record, app_id, product.id, asked)
    authorization = current_authorization(session, record.authorization_id)
    check_payer(authorization, asked)
    order = session.get(Order, asked.order_id) if asked.order_id else None
    user = granted_user(asked, record, order)
    answer = idempotency.answer(stored, fingerprint(record, authorization, user))
    return answer.status, answer.body, record.audience
