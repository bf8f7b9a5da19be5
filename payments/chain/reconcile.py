"""Reconciliation (spec 3.2): ``ChargeSettled`` logs against batches, charges and deliveries.

Both directions: every log in the scanned blocks must match a charge (payer, recipient,
amount) and its transaction must move exactly that much of *our* token from payer to
recipient; every charge the ledger calls settled must have its log. Safe drift (the chain
proves a settlement the ledger missed, a ``settled_first`` delivery left waiting, a batch
left ``settling``) is repaired; anything touching money is reported to operators as a
:class:`~payments.chain.models.ChainFinding`, never changed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from payments.chain.cursors import locked_cursor
from payments.chain.gateway import MAX_LOG_BLOCKS, ChainGateway, ChargeSettledLog, Receipt
from payments.chain.models import ChainCursor, ChainTransaction, FindingKind, TxStatus
from payments.chain.settlement_states import record_finding, settle_charges
from payments.chain.tx_records import batch_of
from payments.db import transaction, utcnow
from payments.ledger.charges import enqueue_event
from payments.ledger.models import (
    Charge,
    Delivery,
    DeliveryStatus,
    SettlementBatch,
    SettlementStatus,
)
from payments.models import App, Product, RiskMode

CURSOR = "reconcile"
LEDGER_LOOKBACK = timedelta(hours=1)  # re-check recent settlements each run
_LOCK_CHUNK = 500  # charges locked per statement: well under SQLite's bound-parameter cap


@dataclass
class ReconcileReport:
    from_block: int
    to_block: int
    logs: int = 0
    repaired: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Evidence:
    logs: list[ChargeSettledLog]
    receipts: dict[str, Receipt | None]
    settled: list[tuple[int, str | None]]  # ledger-settled charges to prove: (seq, tx hash)


class Reconciler:
    def __init__(self, sessions: sessionmaker[Session], chain: ChainGateway, *,
                 clock: Callable[[], datetime] = utcnow, log_blocks: int = MAX_LOG_BLOCKS) -> None:
        self._sessions = sessions
        self._chain = chain
        self._clock = clock
        self._log_blocks = log_blocks

    def run(self, *, from_block: int | None = None, to_block: int | None = None,
            ledger_since: datetime | None = None) -> ReconcileReport:
        """Scan from the saved cursor (or ``from_block``) to the last confirmed block."""
        cursor_block, last_run = self._cursor()
        confirmed = self._chain.block_number() - self._chain.confirmations + 1
        if from_block is not None:
            start = from_block
        elif cursor_block >= 0:
            start = cursor_block + 1
        else:  # first run: from our first transaction, not from genesis
            start = self._first_block(confirmed)
        # Nodes cap eth_getLogs ranges: catch up a slice per run.
        end = min(confirmed, start + self._log_blocks - 1) if to_block is None else to_block
        if ledger_since is None and last_run is not None:
            ledger_since = last_run - LEDGER_LOOKBACK
        report = ReconcileReport(start, end)
        evidence = self._gather(start, end, ledger_since)
        report.logs = len(evidence.logs)
        now = self._clock()
        with transaction(self._sessions) as session:
            _lock_charges(session, evidence.logs)
            for found in evidence.logs:
                self._check_log(session, found, now, report)
            for tx_hash, logs in _by_tx(evidence.logs).items():
                self._check_transfers(session, tx_hash, logs, evidence.receipts.get(tx_hash),
                                      now, report)
            for seq, settled_by in evidence.settled:
                self._check_proof(session, seq, settled_by, evidence, now, report)
            self._close_batches(session, report)
            if to_block is None and end >= start:
                self._save_cursor(session, end, now)
        return report

    # -- reads before the write transaction ----------------------------------------------

    def _cursor(self) -> tuple[int, datetime | None]:
        with self._sessions() as session:
            row = session.get(ChainCursor, CURSOR)
            return (row.block, row.updated_at) if row else (-1, None)

    def _first_block(self, confirmed: int) -> int:
        with self._sessions() as session:
            first = session.scalar(select(func.min(ChainTransaction.block_number)))
        return int(first) if first is not None else max(confirmed - self._log_blocks + 1, 0)

    def _gather(self, start: int, end: int, since: datetime | None) -> _Evidence:
        logs = self._chain.charge_settled_logs(start, end) if end >= start else []
        with self._sessions() as session:
            query = select(Charge.seq, Charge.settlement_tx_hash).where(
                Charge.settlement_status == SettlementStatus.SETTLED)
            if since is not None:
                query = query.where(Charge.settled_at >= since)
            settled = [(int(seq), tx) for seq, tx in session.execute(query)]
        hashes = {lg.tx_hash for lg in logs} | {tx for _, tx in settled if tx}
        return _Evidence(logs, {h: self._chain.receipt(h) for h in hashes}, settled)

    # -- checks ----------------------------------------------------------------------------

    def _check_log(self, session: Session, found: ChargeSettledLog, now: datetime,
                   report: ReconcileReport) -> None:
        seq = int.from_bytes(found.charge_id, "big")
        charge = session.get(Charge, seq) if seq < 2**63 else None
        detail: dict[str, object] = {"log": {"owner": found.owner, "recipient": found.recipient,
                          "amount": str(found.amount), "block": found.block_number}}
        if charge is None:
            self._report(session, FindingKind.UNKNOWN_CHARGE, now, report, seq, found.tx_hash,
                         detail)
            return
        problems = [kind for kind, ok in (
            (FindingKind.PAYER_MISMATCH, found.owner.lower() == charge.owner_wallet.lower()),
            (FindingKind.RECIPIENT_MISMATCH, found.recipient.lower() == charge.pay_to.lower()),
            (FindingKind.AMOUNT_MISMATCH, found.amount == charge.amount_atomic)) if not ok]
        detail["ledger"] = {"owner": charge.owner_wallet, "recipient": charge.pay_to,
                            "amount": str(charge.amount_atomic)}
        for kind in problems:
            self._report(session, kind, now, report, seq, found.tx_hash, detail)
        if problems:
            return
        if charge.settlement_status != SettlementStatus.SETTLED:
            previous = charge.settlement_status.value
            batch_id = batch_of(session, found.tx_hash)
            charge.batch_id = batch_id or charge.batch_id
            settle_charges(session, [charge], found.tx_hash, self._chain.params, now,
                           proven=True)
            self._repaired(session, report, f"charge {seq}: {previous} -> settled", now, seq,
                           found.tx_hash)
        elif charge.settlement_tx_hash != found.tx_hash:
            detail["ledgerTx"] = charge.settlement_tx_hash
            self._report(session, FindingKind.TX_MISMATCH, now, report, seq, found.tx_hash,
                         detail)
        else:
            self._ready_delivery(session, charge, now, report)

    def _check_transfers(self, session: Session, tx_hash: str, logs: list[ChargeSettledLog],
                         receipt: Receipt | None, now: datetime,
                         report: ReconcileReport) -> None:
        """Each (payer, recipient) of a transaction must receive the sum of its charges in
        our token: one ``transferFrom`` per pair, netted."""
        token = self._chain.params.token.lower()
        expected: dict[tuple[str, str], int] = defaultdict(int)
        for found in logs:
            expected[(found.owner.lower(), found.recipient.lower())] += found.amount
        moved: dict[tuple[str, str], int] = defaultdict(int)
        foreign: dict[tuple[str, str], str] = {}
        for transfer in receipt.transfers if receipt else ():
            pair = (transfer.sender.lower(), transfer.recipient.lower())
            if transfer.token.lower() == token:
                moved[pair] += transfer.amount
            else:
                foreign[pair] = transfer.token
        for pair, amount in expected.items():
            if moved.get(pair, 0) != amount:
                self._report(session, FindingKind.TOKEN_MISMATCH, now, report, None, tx_hash, {
                    "owner": pair[0], "recipient": pair[1], "expected": str(amount),
                    "movedInOurToken": str(moved.get(pair, 0)),
                    "otherToken": foreign.get(pair)}, key=f"{pair[0]}>{pair[1]}")

    def _check_proof(self, session: Session, seq: int, tx_hash: str | None,
                     evidence: _Evidence, now: datetime, report: ReconcileReport) -> None:
        receipt = evidence.receipts.get(tx_hash) if tx_hash else None
        proven = receipt is not None and receipt.succeeded and any(
            int.from_bytes(c.charge_id, "big") == seq for c in receipt.charges)
        if not proven:
            self._report(session, FindingKind.MISSING_EVENT, now, report, seq, tx_hash, {
                "reason": "the ledger says settled; no ChargeSettled log in its transaction"})

    def _ready_delivery(self, session: Session, charge: Charge, now: datetime,
                        report: ReconcileReport) -> None:
        delivery = session.scalar(select(Delivery).where(Delivery.charge_seq == charge.seq))
        product = session.get(Product, charge.product_id)
        app = session.get(App, charge.app_id)
        if (delivery is None or product is None or app is None
                or product.risk_mode != RiskMode.SETTLED_FIRST
                or delivery.status == DeliveryStatus.DELIVERED):
            return
        delivery.status, delivery.delivered_at = DeliveryStatus.DELIVERED, now
        enqueue_event(session, "payment.delivered", app, product, charge, delivery,
                      self._chain.params, now)
        self._repaired(session, report, f"delivery {delivery.id}: ready (charge settled)", now,
                       charge.seq, charge.settlement_tx_hash)

    def _close_batches(self, session: Session, report: ReconcileReport) -> None:
        """A ``settling`` batch whose transaction confirmed and whose charges all settled."""
        for batch in session.scalars(select(SettlementBatch).where(
                SettlementBatch.status == SettlementStatus.SETTLING,
                SettlementBatch.tx_hash.is_not(None))):
            statuses = set(session.scalars(select(Charge.settlement_status).where(
                Charge.batch_id == batch.id)))
            if statuses == {SettlementStatus.SETTLED}:
                batch.status, batch.settled_at = SettlementStatus.SETTLED, self._clock()
                sent = session.scalar(select(ChainTransaction).where(
                    ChainTransaction.tx_hash == batch.tx_hash))
                if sent is not None and sent.status == TxStatus.PENDING:
                    sent.status, sent.resolved_at = TxStatus.CONFIRMED, batch.settled_at
                report.repaired.append(f"batch {batch.id}: settling -> settled")

    # -- output ----------------------------------------------------------------------------

    def _report(self, session: Session, kind: FindingKind, now: datetime,
                report: ReconcileReport, seq: int | None, tx_hash: str | None,
                detail: dict[str, object], key: str = "") -> None:
        if record_finding(session, kind, now, charge_seq=seq, tx_hash=tx_hash, detail=detail,
                          key=key):
            report.findings.append(f"{kind.value}:{seq if seq is not None else tx_hash}")

    def _repaired(self, session: Session, report: ReconcileReport, what: str, now: datetime,
                  seq: int, tx_hash: str | None) -> None:
        report.repaired.append(what)
        record_finding(session, FindingKind.REPAIRED, now, charge_seq=seq, tx_hash=tx_hash,
                       detail={"repair": what}, key=what)

    @staticmethod
    def _save_cursor(session: Session, block: int, now: datetime) -> None:
        row = locked_cursor(session, CURSOR, now)
        row.block, row.updated_at = max(row.block, block), now


def _lock_charges(session: Session, logs: Iterable[ChargeSettledLog]) -> None:
    """Lock the logged charges, in seq order (as the settlement worker does), and read them
    as they are now. Another process's worker may be applying the very batch these logs
    came from: read unlocked, its charges look ``settling`` until it commits, and repairing
    them after that settled each twice (a second ``payment.settled``). Locked, this waits
    for that commit and sees them settled (PostgreSQL; SQLite's writers wait at BEGIN)."""
    seqs = sorted({seq for seq in (int.from_bytes(lg.charge_id, "big") for lg in logs)
                   if seq < 2**63})
    for start in range(0, len(seqs), _LOCK_CHUNK):  # ascending chunks: still seq order
        chunk = seqs[start:start + _LOCK_CHUNK]
        session.scalars(select(Charge).where(Charge.seq.in_(chunk)).order_by(Charge.seq)
                        .with_for_update().execution_options(populate_existing=True)).all()


def _by_tx(logs: Iterable[ChargeSettledLog]) -> dict[str, list[ChargeSettledLog]]:
    grouped: dict[str, list[ChargeSettledLog]] = defaultdict(list)
    for found in logs:
        grouped[found.tx_hash].append(found)
    return grouped
