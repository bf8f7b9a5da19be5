"""Typed views of the backend API's answers (spec 2.4-2.7, 4.2-4.5): pure parsing.

Amounts become ``int`` (atomic units; the wire carries integer strings); timestamps stay
the ISO 8601 strings the service sent. Every object keeps ``raw``, the JSON it was read
from, so a field the service adds later is never out of reach. An answer without a field
the service always sends is refused with :class:`AnswerError` rather than guessed at.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from svc.amounts import is_atomic_text
from svc.handoff import client_safe
from svc.proofs import ProofError, proven_delivery_status, verify_payment_proof

# TrustedCharge.status when its proof predates ``deliveryStatus`` (a replay of a charge
# made before proofs carried it): never grantable; look the delivery up.
STATUS_UNPROVEN = "unproven"


class AnswerError(ValueError):
    """A 2xx answer that does not have the shape this SDK knows (wrong URL, old service)."""


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise AnswerError(f"The service's answer has no object {where!r}.")
    return value


def _str(data: Mapping[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str):
        raise AnswerError(f"The service's answer has no string {name!r}.")
    return value


def _opt_str(data: Mapping[str, Any], name: str) -> str | None:
    value = data.get(name)
    return value if isinstance(value, str) else None


def _atomic(data: Mapping[str, Any], name: str) -> int:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise AnswerError(f"The service's answer has no amount {name!r}.")
    if isinstance(value, str) and not is_atomic_text(value):
        raise AnswerError(f"{name!r} in the service's answer is not an integer.")
    return int(value)


def _opt_atomic(data: Mapping[str, Any], name: str) -> int | None:
    return None if data.get(name) is None else _atomic(data, name)


def _opt_bool(data: Mapping[str, Any], name: str) -> bool | None:
    value = data.get(name)
    return value if isinstance(value, bool) else None


@dataclass(frozen=True)
class Order:
    """``POST /api/orders`` or ``GET /api/orders/<id>``. ``payment_url`` and
    ``product_slug`` come with the creation answer only (the lookup has no ``product``)."""

    id: str
    status: str
    amount_atomic: int
    product_id: str
    payment_url: str | None
    product_slug: str | None
    developer_user_id: str | None
    idempotency_key: str | None
    charge_id: str | None
    created_at: str | None
    paid_at: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_answer(cls, answer: dict[str, Any]) -> Order:
        order = _object(answer.get("order"), "order")
        product = answer.get("product") if isinstance(answer.get("product"), Mapping) else {}
        assert isinstance(product, Mapping)
        return cls(
            id=_str(order, "id"), status=_str(order, "status"),
            amount_atomic=_atomic(order, "amountAtomic"),
            product_id=_opt_str(order, "productId") or _str(product, "id"),
            payment_url=_opt_str(product, "paymentUrl"), product_slug=_opt_str(product, "slug"),
            developer_user_id=_opt_str(order, "developerUserId"),
            idempotency_key=_opt_str(order, "idempotencyKey"),
            charge_id=_opt_str(order, "chargeId"), created_at=_opt_str(order, "createdAt"),
            paid_at=_opt_str(order, "paidAt"), raw=answer)


@dataclass(frozen=True)
class Delivery:
    """The fulfilment record to trust (spec 2.5): grant once per ``id`` / ``idempotency_key``.

    From a delivery lookup every field is as served. From a trusted charge
    (:attr:`TrustedCharge.delivery`) the fields the charge answer does not carry
    (``fulfilled``, ``item_id``, ``payment_mode``, ``network``, ``pay_to``,
    ``settlement_tx_hash``, ``delivered_at``) are ``None``: look it up for them.
    """

    id: str
    idempotency_key: str
    charge_id: str
    status: str
    settlement_status: str
    amount_atomic: int
    app_id: str | None
    product_id: str | None
    developer_user_id: str | None
    wallet_address: str | None
    order_id: str | None
    fulfilled: bool | None
    item_id: str | None
    payment_mode: str | None
    network: str | None
    pay_to: str | None
    settlement_tx_hash: str | None
    delivered_at: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_answer(cls, answer: dict[str, Any]) -> Delivery:
        found = _object(answer.get("delivery"), "delivery")
        return cls(
            id=_str(found, "deliveryId"), idempotency_key=_str(found, "idempotencyKey"),
            charge_id=_str(found, "chargeId"), status=_str(found, "status"),
            settlement_status=_str(found, "settlementStatus"),
            amount_atomic=_atomic(found, "amount"), app_id=_opt_str(found, "appId"),
            product_id=_opt_str(found, "productId"),
            developer_user_id=_opt_str(found, "developerUserId"),
            wallet_address=_opt_str(found, "walletAddress"), order_id=_opt_str(found, "orderId"),
            fulfilled=_opt_bool(found, "fulfilled"), item_id=_opt_str(found, "itemId"),
            payment_mode=_opt_str(found, "paymentMode"), network=_opt_str(found, "network"),
            pay_to=_opt_str(found, "payTo"),
            settlement_tx_hash=_opt_str(found, "settlementTxHash"),
            delivered_at=_opt_str(found, "deliveredAt"), raw=answer)

    @property
    def grantable(self) -> bool:
        """Ready to fulfil within the product's risk mode (spec 1.6): ``delivered``.
        A ``settled_first`` delivery is ``awaiting_settlement`` until the chain settles."""
        return self.status == "delivered"


@dataclass(frozen=True)
class Receipt:
    """``GET /api/receipts/<charge_id>``: the charge as the ledger records it."""

    charge_id: str
    amount_atomic: int
    currency: str | None
    network: str | None
    simulated: bool | None
    pay_to: str | None
    owner_wallet: str | None
    budget_spender: str | None
    settlement_status: str
    settlement_tx_hash: str | None
    created_at: str | None
    settled_at: str | None
    delivery_id: str | None
    order_id: str | None
    payment_path: str | None
    app_id: str | None
    app_slug: str | None
    product_id: str | None
    product_slug: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_answer(cls, answer: dict[str, Any]) -> Receipt:
        found = _object(answer.get("receipt"), "receipt")
        app = found.get("app") if isinstance(found.get("app"), Mapping) else {}
        product = found.get("product") if isinstance(found.get("product"), Mapping) else {}
        assert isinstance(app, Mapping) and isinstance(product, Mapping)
        return cls(
            charge_id=_str(found, "chargeId"), amount_atomic=_atomic(found, "amountAtomic"),
            currency=_opt_str(found, "currency"), network=_opt_str(found, "network"),
            simulated=_opt_bool(found, "simulated"), pay_to=_opt_str(found, "payTo"),
            owner_wallet=_opt_str(found, "ownerWallet"),
            budget_spender=_opt_str(found, "budgetSpender"),
            settlement_status=_str(found, "settlementStatus"),
            settlement_tx_hash=_opt_str(found, "settlementTxHash"),
            created_at=_opt_str(found, "createdAt"), settled_at=_opt_str(found, "settledAt"),
            delivery_id=_opt_str(found, "deliveryId"), order_id=_opt_str(found, "orderId"),
            payment_path=_opt_str(found, "paymentPath"), app_id=_opt_str(app, "id"),
            app_slug=_opt_str(app, "slug"), product_id=_opt_str(product, "id"),
            product_slug=_opt_str(product, "slug"), raw=answer)


@dataclass(frozen=True)
class Connection:
    """An account connection (spec 2.7): a developer-side account bound to a wallet."""

    id: str
    status: str
    owner_wallet: str | None
    budget_remaining: int | None
    bound_at: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_object(cls, found: Mapping[str, Any]) -> Connection:
        return cls(id=_str(found, "id"), status=_str(found, "status"),
                   owner_wallet=_opt_str(found, "ownerWallet"),
                   budget_remaining=_opt_atomic(found, "budgetRemaining"),
                   bound_at=_opt_str(found, "boundAt"), raw=dict(found))


@dataclass(frozen=True)
class Handoff:
    """``POST /api/account-handoffs`` (spec 4.5, 3.5).

    ``authorization`` (``ready`` only) holds a live summary code: keep it server-side and
    out of logs (it is left out of ``repr``); give the browser :meth:`client_safe`.
    """

    status: str
    portal_url: str
    expires_at: str
    app_slug: str
    game_account_label: str
    connection: Connection | None
    authorization: dict[str, Any] | None = field(repr=False)
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_answer(cls, answer: dict[str, Any]) -> Handoff:
        handoff = _object(answer.get("handoff"), "handoff")
        connection = answer.get("connection")
        authorization = answer.get("authorization")
        return cls(
            status=_str(answer, "status"), portal_url=_str(handoff, "portalUrl"),
            expires_at=_str(handoff, "expiresAt"), app_slug=_str(handoff, "appSlug"),
            game_account_label=_opt_str(handoff, "gameAccountLabel") or "",
            connection=(Connection.from_object(connection)
                        if isinstance(connection, Mapping) else None),
            authorization=dict(authorization) if isinstance(authorization, Mapping) else None,
            raw=answer)

    def client_safe(self) -> dict[str, Any]:
        """What the frontend may see (spec 4.5): never the authorization code."""
        return client_safe(self.raw)


@dataclass(frozen=True)
class TrustedCharge:
    """``POST /api/charges`` with its ``paymentProof`` verified by this client's key.

    ``proof`` is the verified payload (spec 4.4); ``delivery`` is built from it and the
    answer, its ``status`` the signed ``deliveryStatus``: when ``delivery.grantable``, grant
    from ``delivery.id`` / ``delivery.idempotency_key`` at once. ``awaiting_settlement``
    (a ``settled_first`` product) is granted on ``payment.delivered`` or a later lookup;
    :data:`STATUS_UNPROVEN` (a proof without the status) once a lookup says ``delivered``.
    ``idempotency_key`` is the request's key (reuse it to retry this very charge).
    """

    charge_id: str
    delivery: Delivery
    proof: dict[str, Any]
    status: str
    amount_atomic: int
    settlement_status: str
    remaining: int | None
    event_id: str | None
    idempotency_key: str
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_answer(cls, answer: dict[str, Any], api_key: str,
                    idempotency_key: str) -> TrustedCharge:
        """Raises :class:`svc.proofs.ProofError` unless ``api_key`` signed the proof and
        the answer says what the signed payload says."""
        proof = verify_payment_proof(answer.get("paymentProof"), api_key)
        status = proven_delivery_status(proof)
        proven = {**_PROVEN, "status": "deliveryStatus"} if status is not None else _PROVEN
        for name, signed in proven.items():
            if str(answer.get(name)) != str(proof.get(signed)):
                raise ProofError(f"The charge answer's {name!r} differs from the signed "
                                 "paymentProof: do not grant.")
        delivery = Delivery(
            id=_str(proof, "deliveryId"), idempotency_key=_str(proof, "idempotencyKey"),
            charge_id=_str(proof, "chargeId"), status=status or STATUS_UNPROVEN,
            settlement_status=_str(answer, "settlementStatus"),
            amount_atomic=_atomic(proof, "amountAtomic"), app_id=_opt_str(proof, "appId"),
            product_id=_opt_str(proof, "productId"),
            developer_user_id=_opt_str(proof, "developerUserId"),
            wallet_address=_opt_str(proof, "ownerWallet"), order_id=_opt_str(answer, "orderId"),
            fulfilled=None, item_id=None, payment_mode=None, network=None, pay_to=None,
            settlement_tx_hash=None, delivered_at=None, raw=answer)
        return cls(charge_id=delivery.charge_id, delivery=delivery, proof=proof,
                   status=delivery.status, amount_atomic=delivery.amount_atomic,
                   settlement_status=delivery.settlement_status,
                   remaining=_opt_atomic(answer, "remaining"),
                   event_id=_opt_str(answer, "eventId"), idempotency_key=idempotency_key,
                   raw=answer)


# The answer's fields that the signed payload also carries (answer name: payload name):
# they must agree. The answer's delivery ``status`` is signed as ``deliveryStatus``.
_PROVEN = {name: name for name in ("chargeId", "deliveryId", "idempotencyKey", "amountAtomic")}
