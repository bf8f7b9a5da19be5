"""Ledger tables. Amounts are integers in USDC atomic units (6 decimals) everywhere.

Single use and budget limits are enforced by the database itself: conditional UPDATEs
(``... WHERE consumed_at IS NULL``, ``... WHERE spent <= value - :amount``) and unique
keys, so they hold under any concurrency on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from payments.db import Base, UtcDateTime, enum_column, id_column, time_column
from payments.ids import IdPrefix

# SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL gets a BIGINT identity.
SEQ = BigInteger().with_variant(Integer(), "sqlite")



class AuthorizationStatus(StrEnum):
    ACTIVE = "active"
    REVOKED = "revoked"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"  # replaced by a renewal: a new permit resets the allowance


class RelayStatus(StrEnum):
    """The chain interface's outbox: the relayer sends ``pending`` permits (chain issue)."""

    PENDING = "pending"
    RELAYED = "relayed"
    FAILED = "failed"


class Authorization(Base):
    """A user's permit-backed budget for BudgetSpenderV2, global across apps (spec 1.8)."""

    __tablename__ = "authorizations"
    __table_args__ = (
        # One live budget per wallet and spender; renewals supersede the old row.
        Index("uq_authorizations_active_owner_spender", "owner_wallet", "spender",
              unique=True, sqlite_where=text("status = 'active'"),
              postgresql_where=text("status = 'active'")),
    )
    id: Mapped[str] = id_column(IdPrefix.AUTHORIZATION)
    owner_wallet: Mapped[str] = mapped_column(String(42), index=True)  # lower-case hex
    spender: Mapped[str] = mapped_column(String(42))  # lower-case hex
    token: Mapped[str] = mapped_column(String(42))
    chain_id: Mapped[int] = mapped_column(BigInteger)
    value_atomic: Mapped[int] = mapped_column(BigInteger)
    # Reserved or charged against this permit; remaining = value - spent, never negative.
    spent_atomic: Mapped[int] = mapped_column(BigInteger, default=0)
    deadline: Mapped[datetime] = mapped_column(UtcDateTime)
    nonce: Mapped[int] = mapped_column(BigInteger)
    signature: Mapped[str] = mapped_column(String(132))
    status: Mapped[AuthorizationStatus] = mapped_column(enum_column(AuthorizationStatus),
                                                        default=AuthorizationStatus.ACTIVE)
    relay_status: Mapped[RelayStatus] = mapped_column(enum_column(RelayStatus),
                                                      default=RelayStatus.PENDING)
    relay_tx_hash: Mapped[str | None] = mapped_column(String(66), default=None)
    created_at: Mapped[datetime] = time_column()
    revoked_at: Mapped[datetime | None] = time_column(nullable=True)
    # The signed Permit(value=0) of a revoke, for the relayer to send after the original.
    revoke_nonce: Mapped[int | None] = mapped_column(BigInteger, default=None)
    revoke_signature: Mapped[str | None] = mapped_column(String(132), default=None)
    revoke_deadline: Mapped[datetime | None] = time_column(nullable=True)  # part of what was signed
    revoke_relay_status: Mapped[RelayStatus | None] = mapped_column(
        enum_column(RelayStatus, "revokerelaystatus"), default=None)


class UsedOwnerProof(Base):
    """An owner proof already exchanged for a summary code: like a permit, it counts once.

    Kept until the proof would have expired anyway: the hash of its owner and signed text,
    so another encoding of the same signature (high s, v as 0/1) is the same proof."""

    __tablename__ = "used_owner_proofs"
    proof_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)


class CodeKind(StrEnum):
    SUMMARY = "summary"
    PAYMENT = "payment"


class AuthCode(Base):
    """Summary and payment codes (spec 3.6): random, stored hashed, short-lived."""

    __tablename__ = "auth_codes"
    # The sweep's: a kind's codes expired before a time (codes.expired_codes).
    __table_args__ = (Index("ix_auth_codes_kind_expires_at", "kind", "expires_at"),)
    id: Mapped[int] = mapped_column(SEQ, primary_key=True, autoincrement=True)
    kind: Mapped[CodeKind] = mapped_column(enum_column(CodeKind))
    code_hash: Mapped[str] = mapped_column(String(64), unique=True)
    authorization_id: Mapped[str] = mapped_column(ForeignKey("authorizations.id"), index=True)
    app_id: Mapped[str] = mapped_column(ForeignKey("apps.id", ondelete="CASCADE"))
    # The browser origin allowed to exchange a summary code (spec 4.6).
    audience: Mapped[str] = mapped_column(String(300))
    return_url: Mapped[str] = mapped_column(String(2048), default="")
    product_id: Mapped[str | None] = mapped_column(ForeignKey("products.id"), default=None)
    order_id: Mapped[str | None] = mapped_column(ForeignKey("orders.id"), default=None)
    connection_id: Mapped[str | None] = mapped_column(ForeignKey("account_connections.id"),
                                                      default=None)
    developer_user_id: Mapped[str | None] = mapped_column(String(200), default=None)
    idempotency_key: Mapped[str | None] = mapped_column(String(200), default=None)
    created_at: Mapped[datetime] = time_column()
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    consumed_at: Mapped[datetime | None] = time_column(nullable=True)


class OrderStatus(StrEnum):
    CREATED = "created"
    PAID = "paid"


class Order(Base):
    __tablename__ = "orders"
    __table_args__ = (UniqueConstraint("app_id", "idempotency_key",
                                       name="uq_orders_app_idempotency_key"),)
    id: Mapped[str] = id_column(IdPrefix.ORDER)
    app_id: Mapped[str] = mapped_column(ForeignKey("apps.id", ondelete="CASCADE"), index=True)
    product_id: Mapped[str] = mapped_column(ForeignKey("products.id"))
    amount_atomic: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[OrderStatus] = mapped_column(enum_column(OrderStatus),
                                                default=OrderStatus.CREATED)
    developer_user_id: Mapped[str] = mapped_column(String(200))
    idempotency_key: Mapped[str] = mapped_column(String(200))
    charge_seq: Mapped[int | None] = mapped_column(ForeignKey("charges.seq"), default=None)
    created_at: Mapped[datetime] = time_column()
    paid_at: Mapped[datetime | None] = time_column(nullable=True)


class SettlementStatus(StrEnum):
    QUEUED = "queued"
    SETTLING = "settling"
    SETTLED = "settled"
    FAILED = "failed"


class SettlementBatch(Base):
    """Charges settled together by one ``chargeBatch`` transaction (chain issue)."""

    __tablename__ = "settlement_batches"
    id: Mapped[str] = id_column(IdPrefix.BATCH)
    status: Mapped[SettlementStatus] = mapped_column(enum_column(SettlementStatus),
                                                     default=SettlementStatus.QUEUED)
    tx_hash: Mapped[str | None] = mapped_column(String(66), default=None)
    tx_nonce: Mapped[int | None] = mapped_column(BigInteger, default=None)
    created_at: Mapped[datetime] = time_column()
    settled_at: Mapped[datetime | None] = time_column(nullable=True)


class Charge(Base):
    """A paid action. ``seq`` is the on-chain charge id (``bytes32(uint256(seq))``)."""

    __tablename__ = "charges"
    seq: Mapped[int] = mapped_column(SEQ, primary_key=True, autoincrement=True)
    app_id: Mapped[str] = mapped_column(ForeignKey("apps.id"), index=True)
    product_id: Mapped[str] = mapped_column(ForeignKey("products.id"))
    order_id: Mapped[str | None] = mapped_column(String(48), default=None)
    authorization_id: Mapped[str] = mapped_column(ForeignKey("authorizations.id"), index=True)
    owner_wallet: Mapped[str] = mapped_column(String(42))
    pay_to: Mapped[str] = mapped_column(String(42))
    amount_atomic: Mapped[int] = mapped_column(BigInteger)
    settlement_status: Mapped[SettlementStatus] = mapped_column(
        enum_column(SettlementStatus), default=SettlementStatus.QUEUED, index=True)
    batch_id: Mapped[str | None] = mapped_column(ForeignKey("settlement_batches.id"),
                                                 default=None, index=True)
    settlement_tx_hash: Mapped[str | None] = mapped_column(String(66), default=None)
    source: Mapped[str] = mapped_column(String(32), default="product_route")
    created_at: Mapped[datetime] = time_column()
    settled_at: Mapped[datetime | None] = time_column(nullable=True)


class DeliveryStatus(StrEnum):
    DELIVERED = "delivered"  # ready for fulfilment within the product's risk mode
    AWAITING_SETTLEMENT = "awaiting_settlement"  # settled_first, not settled yet
    FAILED = "failed"  # settlement failed; the developer must revoke or reconcile


class Delivery(Base):
    """The fulfilment record a developer backend trusts (spec 2.5)."""

    __tablename__ = "deliveries"
    __table_args__ = (UniqueConstraint("app_id", "idempotency_key",
                                       name="uq_deliveries_app_idempotency_key"),)
    id: Mapped[str] = id_column(IdPrefix.DELIVERY)
    app_id: Mapped[str] = mapped_column(ForeignKey("apps.id"), index=True)
    product_id: Mapped[str] = mapped_column(ForeignKey("products.id"))
    order_id: Mapped[str | None] = mapped_column(String(48), default=None)
    charge_seq: Mapped[int] = mapped_column(ForeignKey("charges.seq"), unique=True)
    idempotency_key: Mapped[str] = mapped_column(String(260))
    developer_user_id: Mapped[str | None] = mapped_column(String(200), default=None)
    wallet_address: Mapped[str] = mapped_column(String(42))
    status: Mapped[DeliveryStatus] = mapped_column(enum_column(DeliveryStatus))
    fulfilled: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = time_column()
    delivered_at: Mapped[datetime | None] = time_column(nullable=True)


class WebhookEvent(Base):
    """An event as sent (spec 2.1); retries reuse its id."""

    __tablename__ = "webhook_events"
    # The attempts list pages an app's events newest first by (created_at, id): a page is
    # read from this index, not sorted out of every event of the app. It also serves every
    # lookup by app_id alone, so app_id has no index of its own.
    __table_args__ = (Index("ix_webhook_events_app_created", "app_id", "created_at", "id"),)
    id: Mapped[str] = id_column(IdPrefix.EVENT)
    app_id: Mapped[str] = mapped_column(ForeignKey("apps.id"))
    type: Mapped[str] = mapped_column(String(40))
    # Indexed: a delivery's events are looked up by it (the legacy twin, fulfilment).
    delivery_id: Mapped[str | None] = mapped_column(ForeignKey("deliveries.id"), default=None,
                                                    index=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = time_column()


class AttemptStatus(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"  # every try of the retry schedule failed; a manual retry may revive it
    SKIPPED = "skipped"  # no enabled endpoint subscribed to the type when it was due


class WebhookAttempt(Base):
    """The outbox row the dispatcher works from (payments/webhooks, docs/webhooks.md).

    A claim moves ``next_attempt_at`` forward by the lease and sets ``claim_token``: a
    dispatcher that dies mid-send loses its claim when the lease passes, and only the
    holder of the token may record the outcome."""

    __tablename__ = "webhook_attempts"
    __table_args__ = (
        Index("ix_webhook_attempts_due", "next_attempt_at",
              sqlite_where=text("status = 'pending'"),
              postgresql_where=text("status = 'pending'")),
        Index("ix_webhook_attempts_queued_behind", "queued_behind",
              sqlite_where=text("queued_behind IS NOT NULL"),
              postgresql_where=text("queued_behind IS NOT NULL")),
    )
    id: Mapped[str] = id_column(IdPrefix.WEBHOOK_ATTEMPT)
    event_id: Mapped[str] = mapped_column(ForeignKey("webhook_events.id"), unique=True)
    status: Mapped[AttemptStatus] = mapped_column(enum_column(AttemptStatus),
                                                  default=AttemptStatus.PENDING, index=True)
    attempt_count: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = time_column()
    response_status: Mapped[int | None] = mapped_column(Integer, default=None)
    signed: Mapped[bool] = mapped_column(Boolean, default=False)
    updated_at: Mapped[datetime] = time_column()
    claim_token: Mapped[str | None] = mapped_column(String(32), default=None)
    endpoint_id: Mapped[str | None] = mapped_column(String(48), default=None)
    last_error: Mapped[str | None] = mapped_column(String(120), default=None)
    delivered_at: Mapped[datetime | None] = time_column(nullable=True)
    # A resend of skipped events goes one at a time, oldest first: a row queued behind
    # another is not claimed until that one's request has been answered (outbox.finish
    # lets it go then). Holds the other row's id; null for every other row.
    queued_behind: Mapped[str | None] = mapped_column(String(48), default=None)


class ConnectionStatus(StrEnum):
    ACTIVE = "active"
    UNLINKED = "unlinked"


class AccountConnection(Base):
    """A developer-side account bound to a payment wallet (spec 1.8, 2.7)."""

    __tablename__ = "account_connections"
    __table_args__ = (
        Index("uq_account_connections_active", "app_id", "merchant_user_hash", unique=True,
              sqlite_where=text("status = 'active'"),
              postgresql_where=text("status = 'active'")),
    )
    id: Mapped[str] = id_column(IdPrefix.CONNECTION)
    app_id: Mapped[str] = mapped_column(ForeignKey("apps.id", ondelete="CASCADE"), index=True)
    # HMAC of merchantUserId scoped to the app: the raw id is never stored.
    merchant_user_hash: Mapped[str] = mapped_column(String(64))
    owner_wallet: Mapped[str] = mapped_column(String(42))
    game_account_label: Mapped[str] = mapped_column(String(120), default="")
    status: Mapped[ConnectionStatus] = mapped_column(enum_column(ConnectionStatus),
                                                     default=ConnectionStatus.ACTIVE)
    bound_at: Mapped[datetime] = time_column()


class IdempotencyRecord(Base):
    """The stored answer for an idempotency key (kept 30 days, see docs/payments.md)."""

    __tablename__ = "idempotency_records"
    __table_args__ = (UniqueConstraint("app_id", "scope", "key",
                                       name="uq_idempotency_records_app_scope_key"),)
    id: Mapped[int] = mapped_column(SEQ, primary_key=True, autoincrement=True)
    app_id: Mapped[str] = mapped_column(ForeignKey("apps.id", ondelete="CASCADE"))
    scope: Mapped[str] = mapped_column(String(40))
    key: Mapped[str] = mapped_column(String(200))
    request_hash: Mapped[str] = mapped_column(String(64))
    response_status: Mapped[int] = mapped_column(Integer)
    response_body: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = time_column()
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
