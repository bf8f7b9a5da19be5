"""Settlement states (spec 3.2) and what each move does to the ledger, in the caller's
transaction: deliveries, ``payment.delivered`` / ``payment.settled`` events, retries.

Charge moves:  queued -> settling -> settled | failed;  failed -> queued.
A chain log proves a charge settled whatever the ledger thought (reconciliation repairs
that drift with :func:`settle_charges` as well).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from payments.chain.batching import BatchPolicy, next_retry
from payments.chain.models import ChainFinding, ChargeRetry, FindingKind
from payments.chain.params import ChainParams
from payments.ledger.charges import enqueue_event
from payments.ledger.models import Charge, Delivery, DeliveryStatus
from payments.ledger.models import SettlementStatus as S
from payments.models import App, Product, RiskMode

ALLOWED = frozenset({(S.QUEUED, S.SETTLING), (S.SETTLING, S.SETTLED),
                     (S.SETTLING, S.FAILED), (S.FAILED, S.QUEUED)})

log = logging.getLogger(__name__)


class InvalidTransition(RuntimeError):
    pass


def move(charge: Charge, to: S) -> None:
    if (charge.settlement_status, to) not in ALLOWED:
        raise InvalidTransition(f"charge {charge.seq}: {charge.settlement_status} -> {to}")
    charge.settlement_status = to


def settle_charges(session: Session, charges: Sequence[Charge], tx_hash: str,
                   params: ChainParams, now: datetime, *, proven: bool = False) -> None:
    """Mark settled by ``tx_hash``; ready ``settled_first`` deliveries; emit events.

    ``proven``: the chain's log is the evidence, so any unsettled state may move (drift).
    """
    for charge in charges:
        if proven:
            charge.settlement_status = S.SETTLED
        else:
            move(charge, S.SETTLED)
        charge.settled_at = now
        charge.settlement_tx_hash = tx_hash
    for charge, delivery, app, product in _context(session, charges):
        if (product.risk_mode == RiskMode.SETTLED_FIRST
                and delivery.status != DeliveryStatus.DELIVERED):
            delivery.status = DeliveryStatus.DELIVERED
            delivery.delivered_at = now
            enqueue_event(session, "payment.delivered", app, product, charge, delivery,
                          params, now)
        enqueue_event(session, "payment.settled", app, product, charge, delivery, params, now)
        retry = session.get(ChargeRetry, charge.seq)
        if retry is not None:
            retry.next_attempt_at = None
            retry.updated_at = now


def fail_charges(session: Session, charges: Sequence[Charge], reason: str, now: datetime,
                 policy: BatchPolicy) -> None:
    """The chain refused them: failed, a retry scheduled (or a finding once out of retries),
    and ``settled_first`` deliveries failed: the developer must not fulfil them."""
    _fail(session, charges, reason, now, policy)


def abandon_charges(session: Session, charges: Sequence[Charge], reason: str,
                    now: datetime) -> None:
    """Failed for good, never retried: nothing can ever pay them (their budget's permit
    could not be relayed). A finding for each, and ``settled_first`` deliveries failed.
    ``queued`` charges pass through ``settling``: spec 3.2 has no other way into ``failed``."""
    for charge in charges:
        if charge.settlement_status == S.QUEUED:
            move(charge, S.SETTLING)
    _fail(session, charges, reason, now, None)


def _fail(session: Session, charges: Sequence[Charge], reason: str, now: datetime,
          policy: BatchPolicy | None) -> None:
    """``failed``, with the retry ``policy`` schedules (an attempt counted) or, without one,
    none; a finding when no retry follows."""
    for charge in charges:
        move(charge, S.FAILED)
        retry = session.get(ChargeRetry, charge.seq)
        if retry is None:
            retry = ChargeRetry(charge_seq=charge.seq, attempts=0)
            session.add(retry)
        if policy is not None:
            retry.attempts += 1
        retry.last_error = reason[:300]
        retry.next_attempt_at = (None if policy is None
                                 else next_retry(retry.attempts, now, policy))
        retry.updated_at = now
        if retry.next_attempt_at is None:
            record_finding(session, FindingKind.RETRIES_EXHAUSTED, now, charge_seq=charge.seq,
                           detail={"attempts": retry.attempts, "reason": reason})
    for _, delivery, _, product in _context(session, charges):
        if (product.risk_mode == RiskMode.SETTLED_FIRST
                and delivery.status == DeliveryStatus.AWAITING_SETTLEMENT):
            delivery.status = DeliveryStatus.FAILED


def release_charges(session: Session, charges: Sequence[Charge]) -> None:
    """Back to ``queued`` through ``failed``, blaming nobody: no transaction ran them."""
    for charge in charges:
        move(charge, S.FAILED)
        move(charge, S.QUEUED)
        charge.batch_id = None


def requeue(session: Session, charges: Sequence[Charge], now: datetime) -> None:
    """failed -> queued for another attempt; a failed ``settled_first`` delivery waits again."""
    for charge in charges:
        move(charge, S.QUEUED)
        charge.batch_id = None
    for _, delivery, _, product in _context(session, charges):
        if (product.risk_mode == RiskMode.SETTLED_FIRST
                and delivery.status == DeliveryStatus.FAILED):
            delivery.status = DeliveryStatus.AWAITING_SETTLEMENT


def record_finding(session: Session, kind: FindingKind, now: datetime, *,
                   charge_seq: int | None = None, batch_id: str | None = None,
                   tx_hash: str | None = None, detail: dict[str, object] | None = None,
                   key: str = "") -> bool:
    """Report once per (kind, charge, tx, key); False if it was already reported."""
    fingerprint = f"{kind.value}:{charge_seq or ''}:{tx_hash or batch_id or ''}:{key}"[:200]
    if session.scalar(select(ChainFinding.id).where(ChainFinding.fingerprint == fingerprint)):
        return False
    session.add(ChainFinding(kind=kind, fingerprint=fingerprint, charge_seq=charge_seq,
                             batch_id=batch_id, tx_hash=tx_hash, detail=detail or {},
                             created_at=now))
    session.flush()
    # Operators see findings in `svc-ops chain findings`; the log line is what alerting
    # watches. Findings hold ids, hashes and addresses, never keys.
    log.warning("chain finding %s: charge %s, batch %s, tx %s", kind.value, charge_seq,
                batch_id, tx_hash)
    return True


def _context(session: Session, charges: Sequence[Charge]
             ) -> list[tuple[Charge, Delivery, App, Product]]:
    if not charges:
        return []
    seqs = [c.seq for c in charges]
    deliveries = {d.charge_seq: d for d in session.scalars(
        select(Delivery).where(Delivery.charge_seq.in_(seqs)))}
    apps = {a.id: a for a in session.scalars(
        select(App).where(App.id.in_({c.app_id for c in charges})))}
    products = {p.id: p for p in session.scalars(
        select(Product).where(Product.id.in_({c.product_id for c in charges})))}
    return [(c, deliveries[c.seq], apps[c.app_id], products[c.product_id])
            for c in charges if c.seq in deliveries]
