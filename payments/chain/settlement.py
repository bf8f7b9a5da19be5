"""The settlement worker: queued charges -> ``chargeBatch`` -> settled or failed.

One cycle: resolve batches left ``settling`` (ours after a crash, or another worker's),
put failed charges whose retry is due back in the queue, then flush batches by size or
age. A batch is claimed and recorded ``settling`` in one transaction, its signed
transaction's hash and nonce in a second one *before* broadcasting, and its outcome in a
third. Whatever step a crash interrupts, the next cycle resolves the batch from those
records (:mod:`payments.chain.journal`), so no charge is lost or settled twice; the
contract's settled bitmap refuses a second settlement in any case.

Claims use ``FOR UPDATE SKIP LOCKED`` (PostgreSQL: any number of workers, one relayer key
each); SQLite ignores it and takes its write lock at BEGIN, so run one worker there.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from payments.chain.batching import (
    NOT_THE_CHARGES,
    BatchPolicy,
    QueuedCharge,
    blame,
    plan_pairs,
    should_flush,
)
from payments.chain.checkpoints import Checkpoint, no_checkpoint
from payments.chain.contracts import charge_id
from payments.chain.gateway import (
    ChainError,
    ChainGateway,
    ChainRevert,
    ChargeSettledLog,
    NonceTaken,
    Receipt,
    SignedTx,
    describe_revert,
)
from payments.chain.journal import Dropped, Mined, replacement_due, resolve_replaced
from payments.chain.models import ChainTransaction, ChargeRetry, FindingKind, TxKind, TxStatus
from payments.chain.settlement_states import (
    fail_charges,
    record_finding,
    release_charges,
    requeue,
    settle_charges,
)
from payments.chain.tx_records import batch_of, drop_pending, finish_tx, record_signed, signed_tx
from payments.db import transaction, utcnow
from payments.ledger.models import (
    Authorization,
    Charge,
    RelayStatus,
    SettlementBatch,
    SettlementStatus,
)

log = logging.getLogger(__name__)
# How far another machine's clock (the API server's, which dates charges) may be ahead.
CLOCK_LEEWAY = timedelta(hours=1)


@dataclass
class CycleReport:
    settled: int = 0
    failed: int = 0
    requeued: int = 0
    batches: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Claim:
    batch_id: str
    charges: tuple[QueuedCharge, ...]


class SettlementWorker:
    def __init__(self, sessions: sessionmaker[Session], chain: ChainGateway, *,
                 policy: BatchPolicy | None = None, clock: Callable[[], datetime] = utcnow,
                 checkpoint: Checkpoint = no_checkpoint) -> None:
        self._sessions = sessions
        self._chain = chain
        self._policy = policy or BatchPolicy()
        self._clock = clock
        self._checkpoint = checkpoint
        chain.release_nonces()  # a restarted worker asks the chain, not its memory

    def run_once(self, max_batches: int = 10) -> CycleReport:
        report = CycleReport()
        try:
            self.resolve_open(report)
            report.requeued += self.requeue_due()
            for _ in range(max_batches):
                batch_id = self.settle_next(report)
                if batch_id is None:
                    break
                report.batches.append(batch_id)
        except Exception:
            self._chain.release_nonces()  # a nonce that never reached the node is reused
            raise
        return report

    # -- recovery ---------------------------------------------------------------------

    def resolve_open(self, report: CycleReport) -> None:
        with self._sessions() as session:
            rows = session.execute(
                select(SettlementBatch.id, SettlementBatch.created_at, ChainTransaction)
                .outerjoin(ChainTransaction, (ChainTransaction.batch_id == SettlementBatch.id)
                           & (ChainTransaction.status == TxStatus.PENDING))
                .where(SettlementBatch.status == SettlementStatus.SETTLING)
                .order_by(SettlementBatch.created_at, ChainTransaction.id)).all()
        # A batch's pending transactions: one, or one and its replacements (same nonce).
        open_batches: dict[str, tuple[datetime, list[ChainTransaction]]] = {}
        for batch_id, created_at, tx in rows:
            sent = open_batches.setdefault(batch_id, (created_at, []))[1]
            if tx is not None:
                sent.append(tx)
        now = self._clock()
        for batch_id, (created_at, sent) in open_batches.items():
            if not sent:
                if now - created_at >= self._policy.unsent_grace:
                    self._release_unsent(batch_id)
                continue
            signed = [signed_tx(tx) for tx in sent]
            outcome = resolve_replaced(self._chain, signed,
                                       wait=min(self._policy.receipt_timeout, 5.0))
            if isinstance(outcome, Mined):
                self._apply(batch_id, outcome.receipt, report)
            elif isinstance(outcome, Dropped):
                self._drop(batch_id)
            elif replacement_due(outcome, signed[-1], sent[-1].created_at, self._chain.relayer,
                                 now, self._policy.replace_after):
                self._replace(batch_id, signed[-1])

    def _replace(self, batch_id: str, latest: SignedTx) -> None:
        """Sign the batch's transaction again with the fees the chain asks now (its base fee
        rose past what the old one offers), recorded before it is sent like the first."""
        replacement = self._chain.replacement(latest)
        if replacement is None:
            return
        with transaction(self._sessions) as session:
            batch = self._lock_open(session, batch_id)
            if batch is None or batch.tx_hash != latest.tx_hash:
                return  # resolved, or replaced by another worker, meanwhile
            if not _record_tx(session, batch, replacement, self._clock()):
                return
        log.warning("settlement batch %s: transaction %s not mined; sent again as %s with "
                    "higher fees", batch_id, latest.tx_hash, replacement.tx_hash)
        with contextlib.suppress(ChainError):  # the next cycle resolves it either way
            self._chain.broadcast(replacement)

    def _release_unsent(self, batch_id: str) -> None:
        """Its worker died before recording a transaction: nothing was sent; requeue."""
        with transaction(self._sessions) as session:
            batch = self._lock_open(session, batch_id)
            if batch is None or batch.tx_hash is not None:
                return
            release_charges(session, self._settling(session, batch_id))
            batch.status = SettlementStatus.FAILED
        log.warning("settlement batch %s was never sent; its charges are queued again",
                    batch_id)

    def _drop(self, batch_id: str) -> None:
        """Its nonce went to another transaction: it can never settle; requeue unblamed."""
        with transaction(self._sessions) as session:
            batch = self._lock_open(session, batch_id)
            if batch is None:
                return
            drop_pending(session, ChainTransaction.batch_id == batch_id,
                         "nonce used by another tx", self._clock())
            release_charges(session, self._settling(session, batch_id))
            batch.status = SettlementStatus.FAILED
        log.warning("settlement batch %s was dropped (nonce reused); charges requeued", batch_id)

    def requeue_due(self) -> int:
        now = self._clock()
        with transaction(self._sessions) as session:
            charges = list(session.scalars(
                select(Charge).join(ChargeRetry, ChargeRetry.charge_seq == Charge.seq)
                .where(Charge.settlement_status == SettlementStatus.FAILED,
                       ChargeRetry.next_attempt_at <= now)
                .order_by(Charge.seq).limit(self._policy.max_charges * 10)
                .with_for_update(of=Charge, skip_locked=True)))
            requeue(session, charges, now)
            return len(charges)

    # -- one batch ----------------------------------------------------------------------

    def settle_next(self, report: CycleReport) -> str | None:
        # Before claiming: a claim that cannot be signed would leave a failed batch behind,
        # one per cycle for as long as the fees stay above the cap.
        self._chain.check_fees()
        claim = self._claim()
        if claim is None:
            return None
        self._checkpoint("claimed")
        try:
            signed, blamed, proven = self._sign(claim)
        except ChainError:
            self._release_claim(claim.batch_id)
            raise
        self._checkpoint("signed")
        if not self._record(claim, signed, blamed, proven, report):
            if signed is not None:
                self._chain.release_nonces()  # signed but never to be sent
            return claim.batch_id
        assert signed is not None
        self._checkpoint("recorded")
        try:
            self._chain.broadcast(signed)
        except NonceTaken:
            # Another sender on our key (a second worker, by mistake) used the nonce: this
            # transaction can never be mined, so its charges go back to the queue now
            # rather than after a receipt timeout, and the next nonce is asked of the node.
            self._chain.release_nonces()
            self._drop(claim.batch_id)
            return claim.batch_id
        self._checkpoint("broadcast")
        receipt = self._chain.wait_receipt(signed.tx_hash, self._policy.receipt_timeout)
        self._checkpoint("receipt")
        if receipt is not None:
            self._apply(claim.batch_id, receipt, report)
        return claim.batch_id

    def _claim(self) -> _Claim | None:
        now = self._clock()
        # Only charges whose budget's permit is on chain: before that (pending) the
        # allowance is not there yet, and a failed relay's charges are abandoned.
        with transaction(self._sessions) as session:
            charges = list(session.scalars(
                select(Charge)
                .join(Authorization, Authorization.id == Charge.authorization_id)
                .where(Charge.settlement_status == SettlementStatus.QUEUED,
                       Authorization.relay_status == RelayStatus.RELAYED)
                .order_by(Charge.seq).limit(self._policy.max_charges)
                .with_for_update(of=Charge, skip_locked=True)))
            oldest = min((c.created_at for c in charges), default=None)
            if not should_flush(len(charges), oldest, now, self._policy):
                return None
            batch = SettlementBatch(status=SettlementStatus.SETTLING, created_at=now)
            session.add(batch)
            session.flush()
            for charge in charges:
                charge.settlement_status = SettlementStatus.SETTLING
                charge.batch_id = batch.id
            return _Claim(batch.id, tuple(
                QueuedCharge(c.seq, c.owner_wallet, c.pay_to, c.amount_atomic)
                for c in charges))

    def _sign(self, claim: _Claim) -> tuple[SignedTx | None, dict[int, str],
                                             dict[int, ChargeSettledLog | None]]:
        """Simulate, taking out the charges a revert names, until the rest would settle."""
        blamed: dict[int, str] = {}
        proven: dict[int, ChargeSettledLog | None] = {}
        remaining = list(claim.charges)
        while remaining:
            pairs = plan_pairs(remaining)
            try:
                return self._chain.sign_charge_batch(pairs), blamed, proven
            except ChainRevert as exc:
                culprits = blame(exc.info, pairs)
                if culprits is None or not culprits.seqs & {c.seq for c in remaining}:
                    if exc.info.name in NOT_THE_CHARGES:
                        raise
                    blamed.update({c.seq: describe_revert(exc.info) for c in remaining})
                    break
                for seq in culprits.seqs:
                    if culprits.already_settled:
                        proven[seq] = self._find_log(seq)
                    else:
                        blamed[seq] = culprits.reason
                remaining = [c for c in remaining if c.seq not in blamed and c.seq not in proven]
        return None, blamed, proven

    def _find_log(self, seq: int) -> ChargeSettledLog | None:
        """The log that settled ``seq``: from the newest block back, a range at a time (nodes
        refuse wide eth_getLogs ranges), down to the first block of our transactions recorded
        since the charge was made (a settlement of it is one of them), or of any of ours."""
        with self._sessions() as session:
            made = session.scalar(select(Charge.created_at).where(Charge.seq == seq))
            first = None
            if made is not None:  # an hour's leeway for the clocks of other machines
                first = session.scalar(select(func.min(ChainTransaction.block_number)).where(
                    ChainTransaction.created_at >= made - CLOCK_LEEWAY))
            if first is None:
                first = session.scalar(select(func.min(ChainTransaction.block_number)))
        low, end = int(first or 0), self._chain.block_number()
        while end >= low:
            start = max(low, end - self._policy.log_blocks + 1)
            logs = self._chain.charge_settled_logs(start, end, charge_id=charge_id(seq))
            if logs:
                return logs[0]
            end = start - 1
        return None

    def _record(self, claim: _Claim, signed: SignedTx | None, blamed: dict[int, str],
                proven: dict[int, ChargeSettledLog | None], report: CycleReport) -> bool:
        """Write the signed transaction (before it is sent) and the charges taken out."""
        now = self._clock()
        with transaction(self._sessions) as session:
            batch = self._lock_open(session, claim.batch_id)
            if batch is None or batch.tx_hash is not None:
                return False  # recovered by someone else meanwhile: do not send
            charges = {c.seq: c for c in self._settling(session, claim.batch_id)}
            for reason in sorted(set(blamed.values())):
                failing = [charges[s] for s, r in blamed.items() if r == reason and s in charges]
                fail_charges(session, failing, reason, now, self._policy)
                report.failed += len(failing)
            self._settle_proven(session, charges, proven, now, report)
            if signed is None or not _record_tx(session, batch, signed, now):
                # Nothing to send, or bytes already mined or refused (a lagging node): the
                # charges not taken out wait for the next batch, unblamed.
                if signed is not None:
                    release_charges(session, [c for s, c in charges.items()
                                              if s not in blamed and s not in proven])
                batch.status = SettlementStatus.FAILED
                return False
            return True

    def _settle_proven(self, session: Session, charges: dict[int, Charge],
                       proven: dict[int, ChargeSettledLog | None], now: datetime,
                       report: CycleReport) -> None:
        """Charges the contract says are settled already (a reused charge id)."""
        for seq, found in proven.items():
            charge = charges.get(seq)
            if charge is None:
                continue
            if found is not None and _matches(charge, found):
                charge.batch_id = batch_of(session, found.tx_hash)
                settle_charges(session, [charge], found.tx_hash, self._chain.params, now)
                report.settled += 1
                continue
            fail_charges(session, [charge], "ChargeAlreadySettled", now, self._policy)
            record_finding(session, FindingKind.MISSING_EVENT if found is None
                           else FindingKind.AMOUNT_MISMATCH, now, charge_seq=seq,
                           tx_hash=found.tx_hash if found else None,
                           detail={"reason": "the contract refused the id as already settled"})
            report.failed += 1

    def _release_claim(self, batch_id: str) -> None:
        with transaction(self._sessions) as session:
            batch = self._lock_open(session, batch_id)
            if batch is not None and batch.tx_hash is None:
                release_charges(session, self._settling(session, batch_id))
                batch.status = SettlementStatus.FAILED

    # -- outcome ------------------------------------------------------------------------

    def _apply(self, batch_id: str, receipt: Receipt, report: CycleReport) -> None:
        reason = None if receipt.succeeded else describe_revert(
            self._chain.revert_reason(receipt.tx_hash))
        now = self._clock()
        with transaction(self._sessions) as session:
            batch = self._lock_open(session, batch_id)
            if batch is None:
                return  # resolved already
            charges = self._settling(session, batch_id)
            if reason is None:
                logged = {int.from_bytes(c.charge_id, "big") for c in receipt.charges}
                settle_charges(session, [c for c in charges if c.seq in logged],
                               receipt.tx_hash, self._chain.params, now)
                unlogged = [c for c in charges if c.seq not in logged]
                fail_charges(session, unlogged, "no ChargeSettled log", now, self._policy)
                for charge in unlogged:
                    record_finding(session, FindingKind.MISSING_EVENT, now,
                                   charge_seq=charge.seq, tx_hash=receipt.tx_hash)
                batch.status, batch.settled_at = SettlementStatus.SETTLED, now
                report.settled += len(charges) - len(unlogged)
                report.failed += len(unlogged)
            else:
                fail_charges(session, charges, reason, now, self._policy)
                batch.status = SettlementStatus.FAILED
                report.failed += len(charges)
            batch.tx_hash = receipt.tx_hash  # the one mined, if it was replaced
            self._finish_tx(session, receipt.tx_hash,
                            TxStatus.CONFIRMED if reason is None else TxStatus.REVERTED,
                            receipt.block_number, reason)
            drop_pending(session, ChainTransaction.batch_id == batch_id,
                         f"replaced; {receipt.tx_hash} was mined", self._clock())
            self._checkpoint("applying")  # inside the transaction: a crash rolls it back
        self._checkpoint("applied")

    # -- small reads ----------------------------------------------------------------------

    @staticmethod
    def _lock_open(session: Session, batch_id: str) -> SettlementBatch | None:
        batch = session.get(SettlementBatch, batch_id, with_for_update=True)
        return batch if batch is not None and batch.status == SettlementStatus.SETTLING else None

    @staticmethod
    def _settling(session: Session, batch_id: str) -> Sequence[Charge]:
        return session.scalars(select(Charge).where(
            Charge.batch_id == batch_id, Charge.settlement_status == SettlementStatus.SETTLING)
            .order_by(Charge.seq).with_for_update()).all()

    def _finish_tx(self, session: Session, tx_hash: str, status: TxStatus,
                   block: int | None, error: str | None) -> None:
        tx = session.scalar(select(ChainTransaction).where(ChainTransaction.tx_hash == tx_hash))
        if tx is not None:
            finish_tx(tx, status, block, error, self._clock())


def _record_tx(session: Session, batch: SettlementBatch, signed: SignedTx,
               now: datetime) -> bool:
    """The batch's transaction (its first, or a replacement under the same nonce), written
    before it is sent; False when it must not be sent (:func:`record_signed`)."""
    if not record_signed(session, signed, now, TxKind.CHARGE_BATCH, batch_id=batch.id):
        return False
    batch.tx_hash, batch.tx_nonce = signed.tx_hash, signed.nonce
    return True


def _matches(charge: Charge, found: ChargeSettledLog) -> bool:
    return (found.amount == charge.amount_atomic
            and found.owner.lower() == charge.owner_wallet.lower()
            and found.recipient.lower() == charge.pay_to.lower())
