"""Tables of the chain workers: sent transactions, charge retries, operator findings, cursors.

The ledger's own tables (``charges``, ``settlement_batches``, ``authorizations``) keep the
states the rest of the service reads; these hold what only the workers need.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, BigInteger, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from payments.db import Base, UtcDateTime, enum_column, utcnow
from payments.ledger.models import SEQ


class TxKind(StrEnum):
    CHARGE_BATCH = "charge_batch"
    PERMIT = "permit"
    REVOKE = "revoke"


class TxStatus(StrEnum):
    REFUSED = "refused"  # the simulation reverted: nothing was signed or sent
    PENDING = "pending"  # signed and recorded; maybe broadcast, maybe mined
    CONFIRMED = "confirmed"
    REVERTED = "reverted"
    DROPPED = "dropped"  # its nonce was consumed by another transaction


class ChainTransaction(Base):
    """Every transaction a relayer key signs, written before it is broadcast.

    Hash, nonce and the signed bytes let any worker resolve it after a crash: a receipt
    decides; a nonce mined by another transaction means it never will be; otherwise the
    same bytes are sent again (which cannot double-spend: same nonce, same hash).
    """

    __tablename__ = "chain_transactions"
    id: Mapped[int] = mapped_column(SEQ, primary_key=True, autoincrement=True)
    kind: Mapped[TxKind] = mapped_column(enum_column(TxKind))
    status: Mapped[TxStatus] = mapped_column(enum_column(TxStatus), index=True)
    sender: Mapped[str | None] = mapped_column(String(42), default=None)
    nonce: Mapped[int | None] = mapped_column(BigInteger, default=None)
    tx_hash: Mapped[str | None] = mapped_column(String(66), default=None, unique=True)
    raw: Mapped[str | None] = mapped_column(Text, default=None)
    batch_id: Mapped[str | None] = mapped_column(ForeignKey("settlement_batches.id"),
                                                 default=None, index=True)
    authorization_id: Mapped[str | None] = mapped_column(ForeignKey("authorizations.id"),
                                                         default=None, index=True)
    error: Mapped[str | None] = mapped_column(String(300), default=None)
    block_number: Mapped[int | None] = mapped_column(BigInteger, default=None)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    resolved_at: Mapped[datetime | None] = mapped_column(UtcDateTime, default=None,
                                                         nullable=True)


class ChargeRetry(Base):
    """Failed settlement attempts of a charge and when it goes back to ``queued``."""

    __tablename__ = "charge_settlement_retries"
    charge_seq: Mapped[int] = mapped_column(ForeignKey("charges.seq"), primary_key=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # None once the retry limit is reached: the charge stays failed for operators.
    next_attempt_at: Mapped[datetime | None] = mapped_column(UtcDateTime, default=None,
                                                             nullable=True, index=True)
    last_error: Mapped[str] = mapped_column(String(300), default="")
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class FindingKind(StrEnum):
    AMOUNT_MISMATCH = "amount_mismatch"
    RECIPIENT_MISMATCH = "recipient_mismatch"
    PAYER_MISMATCH = "payer_mismatch"
    TOKEN_MISMATCH = "token_mismatch"  # noqa: S105  (a finding kind, not a secret)
    MISSING_EVENT = "missing_event"  # the ledger says settled; the chain has no log
    UNKNOWN_CHARGE = "unknown_charge"  # a log for a charge the ledger does not have
    TX_MISMATCH = "tx_mismatch"  # settled, but by another transaction than recorded
    RETRIES_EXHAUSTED = "retries_exhausted"
    BUDGET_DRIFT = "budget_drift"
    REPAIRED = "repaired"  # safe drift the job fixed itself, kept for the audit trail


class ChainFinding(Base):
    """Something an operator must look at (spec 3.2: reconciliation alerts operators).

    ``fingerprint`` is unique, so running a job twice reports a problem once.
    """

    __tablename__ = "chain_findings"
    id: Mapped[int] = mapped_column(SEQ, primary_key=True, autoincrement=True)
    kind: Mapped[FindingKind] = mapped_column(enum_column(FindingKind), index=True)
    fingerprint: Mapped[str] = mapped_column(String(200), unique=True)
    charge_seq: Mapped[int | None] = mapped_column(BigInteger, default=None)
    batch_id: Mapped[str | None] = mapped_column(String(48), default=None)
    tx_hash: Mapped[str | None] = mapped_column(String(66), default=None)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    resolved_at: Mapped[datetime | None] = mapped_column(UtcDateTime, default=None,
                                                         nullable=True)


class ChainCursor(Base):
    """How far a job has gone: a log-scanning one's last finished block, or, for one that
    walks rows (the budget drift check), the last row it finished (``block`` unused, 0).
    In dev, the ``dev_chain`` row names the chain the ledger's rows are on (router/dev_chain.py:
    ``position`` its genesis hash, ``block`` the last ``chain_transactions`` id before it)."""

    __tablename__ = "chain_cursors"
    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    block: Mapped[int] = mapped_column(BigInteger)
    position: Mapped[str | None] = mapped_column(String(64), default=None, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
