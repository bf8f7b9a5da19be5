"""The relayer: sends users' signed permits (budgets) and ``Permit(value=0)`` revokes.

The user never needs ETH (spec 1 item 3): ``relayPermit`` is sent by our key. The ledger
writes ``relay_status = pending`` (the outbox); this worker verifies the signature again
off-chain, simulates, records the signed transaction before broadcasting it, and moves
the row to ``relayed`` or ``failed`` (the decoded reason is kept on the transaction row).
One owner's permits and revokes go out in nonce order, each after the earlier is mined,
and one that would leave charges accepted before it short waits for their settlement
attempt, up to a bound (:mod:`payments.chain.relay_hold`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import and_, exists, select
from sqlalchemy.orm import Session, sessionmaker

from payments.chain.batching import NOT_THE_CHARGES, BatchPolicy
from payments.chain.checkpoints import Checkpoint, no_checkpoint
from payments.chain.gateway import (
    ChainError,
    ChainGateway,
    ChainRevert,
    NonceTaken,
    Receipt,
    SignedTx,
    describe_revert,
)
from payments.chain.journal import (
    REPLACE_AFTER,
    Dropped,
    Mined,
    replacement_due,
    resolve_replaced,
)
from payments.chain.models import ChainTransaction, TxKind, TxStatus
from payments.chain.relay_hold import Hold, hold
from payments.chain.relay_jobs import RelayJob, relay_job
from payments.chain.settlement_states import abandon_charges
from payments.chain.tx_records import drop_pending, finish_tx, record_signed, signed_tx
from payments.db import transaction, utcnow
from payments.errors import ApiError
from payments.ledger.authorizations import recount_carried
from payments.ledger.models import (
    Authorization,
    AuthorizationStatus,
    Charge,
    RelayStatus,
    SettlementStatus,
)
from payments.ledger.permits import Permit, verify_permit

log = logging.getLogger(__name__)
OnRelayed = Callable[[str, int], None]  # (owner, value) after a budget permit confirmed
HOLD = BatchPolicy().relay_hold


def no_hook(owner: str, value: int) -> None:
    """In-process dev chains pass a faucet here so a new budget has test USDC behind it."""


class Relayer:
    def __init__(self, sessions: sessionmaker[Session], chain: ChainGateway, *,
                 clock: Callable[[], datetime] = utcnow, checkpoint: Checkpoint = no_checkpoint,
                 on_relayed: OnRelayed = no_hook, receipt_timeout: float = 120.0,
                 replace_after: timedelta = REPLACE_AFTER, hold: timedelta = HOLD,
                 limit: int = 50) -> None:
        """``hold``: how long a relay may wait for the charges accepted before it (the
        worker cycle passes its ``BatchPolicy.relay_hold``)."""
        self._sessions = sessions
        self._chain = chain
        self._clock = clock
        self._checkpoint = checkpoint
        self._on_relayed = on_relayed
        self._timeout = receipt_timeout
        self._replace_after = replace_after  # as the settlement worker's (docs/chain.md)
        self._hold = hold
        self._limit = limit
        chain.release_nonces()

    def run_once(self) -> int:
        """Relay what is pending; returns how many permits and revokes were finished."""
        try:
            done = self.resolve_open()
            # The token takes one owner's permits (budgets and revokes alike) in nonce order
            # only, and a relay is simulated against the latest block. So an owner's relays
            # go out by nonce, and none while an earlier one is still unmined: simulated
            # before it, a later one reverts and its budget is failed for good (a renewal
            # signed right after a revoke was, and the charges it took were abandoned). A
            # relay waiting for earlier charges holds its owner's later ones the same way.
            waiting = self._owners_in_flight()
            jobs = sorted([*self._pending(TxKind.PERMIT), *self._pending(TxKind.REVOKE)],
                          key=lambda job: (job.owner, job.nonce))
            for job in jobs:
                if job.owner in waiting:
                    continue
                finished = self._relay(job)
                if not finished:  # sent and not mined yet, waiting, or left to another
                    waiting.add(job.owner)
                done += finished
        except Exception:
            self._chain.release_nonces()
            raise
        return done

    def resolve_open(self) -> int:
        with self._sessions() as session:
            open_txs = session.scalars(select(ChainTransaction).where(
                ChainTransaction.kind.in_((TxKind.PERMIT, TxKind.REVOKE)),
                ChainTransaction.status == TxStatus.PENDING).order_by(ChainTransaction.id)).all()
        # A relay's pending transactions: one, or one and its fee replacements (same nonce).
        relays: dict[tuple[str | None, TxKind], list[ChainTransaction]] = {}
        for tx in open_txs:
            relays.setdefault((tx.authorization_id, tx.kind), []).append(tx)
        done = 0
        now = self._clock()
        for sent in relays.values():
            signed = [signed_tx(tx) for tx in sent]
            outcome = resolve_replaced(self._chain, signed, wait=min(self._timeout, 5.0))
            if isinstance(outcome, Mined):
                done += self._apply(outcome.receipt)
            elif isinstance(outcome, Dropped):
                for dropped in signed:
                    self._drop(dropped.tx_hash)
            elif replacement_due(outcome, signed[-1], sent[-1].created_at, self._chain.relayer,
                                 now, self._replace_after):
                self._replace(signed[-1])
        return done

    def _drop(self, tx_hash: str) -> None:
        """Its nonce went to another transaction; the permit stays pending, to be sent again."""
        with transaction(self._sessions) as session:
            row = session.scalar(select(ChainTransaction).where(
                ChainTransaction.tx_hash == tx_hash).with_for_update())
            if row is None or row.status != TxStatus.PENDING:
                return
            row.status, row.resolved_at = TxStatus.DROPPED, self._clock()
        log.warning("relay transaction %s was dropped (nonce reused); it is signed again",
                    tx_hash)

    def _replace(self, latest: SignedTx) -> None:
        """Sign a relay again with the fees the chain asks now (the base fee passed its cap),
        recorded before it is sent; whichever of the two is mined decides (docs/chain.md)."""
        replacement = self._chain.replacement(latest)
        if replacement is None:
            return
        with transaction(self._sessions) as session:
            row = session.scalar(select(ChainTransaction).where(
                ChainTransaction.tx_hash == latest.tx_hash).with_for_update())
            if row is None or row.status != TxStatus.PENDING or row.authorization_id is None:
                return
            authorization = session.get(Authorization, row.authorization_id,
                                        with_for_update=True)
            newer = session.scalar(select(ChainTransaction.id).where(
                ChainTransaction.authorization_id == row.authorization_id,
                ChainTransaction.kind == row.kind, ChainTransaction.id > row.id).limit(1))
            if authorization is None or newer is not None:
                return  # replaced by another worker meanwhile
            if not _record_tx(session, authorization, row.kind, replacement, self._clock()):
                return
        log.warning("relay transaction %s not mined; sent again as %s with higher fees",
                    latest.tx_hash, replacement.tx_hash)
        with contextlib.suppress(ChainError):  # the next cycle resolves it either way
            self._chain.broadcast(replacement)

    def _owners_in_flight(self) -> set[str]:
        """Owners with a relay sent and not resolved yet (after :meth:`resolve_open`)."""
        with self._sessions() as session:
            return set(session.scalars(
                select(Authorization.owner_wallet).distinct()
                .join(ChainTransaction, ChainTransaction.authorization_id == Authorization.id)
                .where(ChainTransaction.kind.in_((TxKind.PERMIT, TxKind.REVOKE)),
                       ChainTransaction.status == TxStatus.PENDING)))

    def _pending(self, kind: TxKind) -> list[RelayJob]:
        in_flight = exists().where(and_(ChainTransaction.authorization_id == Authorization.id,
                                        ChainTransaction.kind == kind,
                                        ChainTransaction.status == TxStatus.PENDING))
        query = select(Authorization).where(~in_flight)
        if kind is TxKind.PERMIT:
            query = query.where(Authorization.relay_status == RelayStatus.PENDING)
        else:  # after the budget's own permit, which has the lower nonce
            query = query.where(Authorization.revoke_relay_status == RelayStatus.PENDING,
                                Authorization.relay_status != RelayStatus.PENDING)
        with self._sessions() as session:
            rows = session.scalars(query.order_by(Authorization.owner_wallet,
                                                  Authorization.nonce).limit(self._limit))
            return [relay_job(a, kind) for a in rows]

    def _relay(self, job: RelayJob) -> int:
        if not self._signed_by_owner(job):
            return self._settle_status(job, RelayStatus.FAILED, None, "invalid permit signature")
        if self._chain.permit_nonce(job.owner) > job.nonce:
            # The token already used this nonce: our earlier send (its record lost) or
            # anyone who submitted the same signed permit. Either way it is on chain.
            return self._settle_status(job, RelayStatus.RELAYED, None, None)
        if not self._may_go(job):
            return 0
        try:
            signed = self._chain.sign_relay_permit(job.owner, job.value, job.deadline,
                                                   bytes.fromhex(job.signature[2:]))
        except ChainRevert as exc:
            if exc.info.name in NOT_THE_CHARGES:
                # Our key is not a relayer (not yet, or no longer: `svc-ops relayer remove`):
                # that says nothing of the permit, which waits for a relayer to send it.
                raise
            if self._chain.permit_nonce(job.owner) > job.nonce:
                # Used between the check above and this estimate (another worker's send,
                # or anyone's, mined meanwhile): on chain all the same. Failing it would
                # revoke a budget the chain backs.
                return self._settle_status(job, RelayStatus.RELAYED, None, None)
            return self._settle_status(job, RelayStatus.FAILED, None, describe_revert(exc.info))
        self._checkpoint("signed")
        if not self._record(job, signed):
            self._chain.release_nonces()
            return 0
        self._checkpoint("recorded")
        try:
            self._chain.broadcast(signed)
        except NonceTaken:  # another sender on our key used the nonce: sign it again
            self._chain.release_nonces()
            self._drop(signed.tx_hash)
            return 0
        self._checkpoint("broadcast")
        receipt = self._chain.wait_receipt(signed.tx_hash, self._timeout)
        if receipt is None:
            return 0  # resolved by a later cycle
        return self._apply(receipt)

    def _may_go(self, job: RelayJob) -> bool:
        """Before signing: not while the charges accepted before it wait (checked again
        where the transaction is recorded), and said when it goes without them."""
        with self._sessions() as session:
            decision = hold(session, job.sets, self._clock(), self._hold)
        if decision is Hold.OVERDUE:
            log.warning("%s of %s waited %s for the charges accepted before it and goes "
                        "without them: their settlement is stuck, and they may fail on chain",
                        job.kind.value, job.authorization_id, self._hold)
        return decision is not Hold.WAIT

    def _signed_by_owner(self, job: RelayJob) -> bool:
        permit = Permit(job.owner, job.value, job.nonce, job.deadline, job.signature)
        try:
            verify_permit(self._chain.params, permit)
        except ApiError:
            return False
        return True

    def _record(self, job: RelayJob, signed: SignedTx) -> bool:
        with transaction(self._sessions) as session:
            authorization = session.get(Authorization, job.authorization_id,
                                        with_for_update=True)
            if authorization is None or _status(authorization, job.kind) != RelayStatus.PENDING:
                return False
            # Another relayer read the same pending row and recorded its transaction first
            # (under this row lock): of two sends one would spend the permit and the other
            # revert, and that revert would fail the budget the first relayed.
            if session.scalar(select(ChainTransaction.id).where(
                    ChainTransaction.authorization_id == job.authorization_id,
                    ChainTransaction.kind == job.kind,
                    ChainTransaction.status == TxStatus.PENDING).limit(1)) is not None:
                return False
            # Once more, in the transaction that decides the send: a failed charge may have
            # been queued again for its retry since the check before signing.
            if hold(session, job.sets, self._clock(), self._hold) is Hold.WAIT:
                return False
            if job.kind is TxKind.PERMIT and authorization.relay_tx_hash is None:
                recount_carried(session, authorization)  # before its first send only
            return _record_tx(session, authorization, job.kind, signed, self._clock())

    def _apply(self, receipt: Receipt) -> int:
        info = None if receipt.succeeded else self._chain.revert_reason(receipt.tx_hash)
        reason = None if info is None else describe_revert(info)
        # A relay signed again after its first transaction was dropped (the node said its
        # nonce was taken, and did not know it) reverts when that first one was mined after
        # all (behind a load balancer, another node had it): the permit is on chain.
        earlier = None if reason is None else self._dropped_but_mined(receipt.tx_hash)
        with transaction(self._sessions) as session:
            tx = session.scalar(select(ChainTransaction).where(
                ChainTransaction.tx_hash == receipt.tx_hash).with_for_update())
            if tx is None or tx.status != TxStatus.PENDING or tx.authorization_id is None:
                return 0
            finish_tx(tx, TxStatus.CONFIRMED if reason is None else TxStatus.REVERTED,
                      receipt.block_number, reason, self._clock())
            if earlier is not None:
                mined = session.scalar(select(ChainTransaction).where(
                    ChainTransaction.tx_hash == earlier.tx_hash).with_for_update())
                if mined is not None and mined.status == TxStatus.DROPPED:
                    finish_tx(mined, TxStatus.CONFIRMED, earlier.block_number, None,
                              self._clock())
                    reason = None
                    log.warning("relay of %s: %s reverted, its dropped %s was mined after all",
                                tx.authorization_id, receipt.tx_hash, earlier.tx_hash)
            drop_pending(session, and_(ChainTransaction.authorization_id == tx.authorization_id,
                                       ChainTransaction.kind == tx.kind,
                                       ChainTransaction.id != tx.id),
                         f"replaced; {receipt.tx_hash} was mined", self._clock())
            authorization = session.get(Authorization, tx.authorization_id, with_for_update=True)
            assert authorization is not None
            # Mined after our key stopped being a relayer: the permit is untouched and its
            # relay waits (pending, no transaction in flight) for a relayer to send it again.
            waits = reason is not None and info is not None and info.name in NOT_THE_CHARGES
            if not waits:
                _set_status(session, authorization, tx.kind,
                            RelayStatus.RELAYED if reason is None else RelayStatus.FAILED,
                            reason, self._clock())
            owner, value = authorization.owner_wallet, authorization.value_atomic
        if reason is None and tx.kind is TxKind.PERMIT:
            self._on_relayed(owner, value)
        elif waits:
            log.warning("relay of %s reverted on chain: %s; it waits for a relayer",
                        tx.authorization_id, reason)
        elif reason is not None:
            log.warning("relay of %s failed on chain: %s", tx.authorization_id, reason)
        return 1

    def _dropped_but_mined(self, tx_hash: str) -> Receipt | None:
        """A successful receipt of a transaction of the same relay that was marked dropped."""
        with self._sessions() as session:
            row = session.scalar(select(ChainTransaction).where(
                ChainTransaction.tx_hash == tx_hash))
            if row is None or row.authorization_id is None:
                return None
            dropped = session.scalars(select(ChainTransaction.tx_hash).where(
                ChainTransaction.authorization_id == row.authorization_id,
                ChainTransaction.kind == row.kind, ChainTransaction.status == TxStatus.DROPPED,
                ChainTransaction.tx_hash.is_not(None))).all()
        for earlier in dropped:
            found = self._chain.receipt(earlier) if earlier else None
            if found is not None and found.succeeded:
                return found
        return None

    def _settle_status(self, job: RelayJob, status: RelayStatus, tx_hash: str | None,
                       reason: str | None) -> int:
        """A decision without a transaction of ours (refused, or already on chain)."""
        with transaction(self._sessions) as session:
            authorization = session.get(Authorization, job.authorization_id,
                                        with_for_update=True)
            if authorization is None or _status(authorization, job.kind) != RelayStatus.PENDING:
                return 0
            _set_status(session, authorization, job.kind, status, reason, self._clock())
            if reason is not None:
                session.add(ChainTransaction(kind=job.kind, status=TxStatus.REFUSED,
                                             tx_hash=tx_hash, error=reason[:300],
                                             authorization_id=job.authorization_id,
                                             created_at=self._clock(),
                                             resolved_at=self._clock()))
        if reason is not None:
            log.warning("relay of %s refused: %s", job.authorization_id, reason)
        elif job.kind is TxKind.PERMIT:
            self._on_relayed(job.owner, job.value)
        return 1


def _record_tx(session: Session, authorization: Authorization, kind: TxKind,
               signed: SignedTx, now: datetime) -> bool:
    """A relay's transaction (its first, or a replacement under the same nonce), written
    before it is sent; a permit's budget points at it. False: not to be sent
    (:func:`record_signed`)."""
    if not record_signed(session, signed, now, kind, authorization_id=authorization.id):
        return False
    if kind is TxKind.PERMIT:
        authorization.relay_tx_hash = signed.tx_hash
    return True


def _permit_failed(session: Session, authorization: Authorization, reason: str,
                   now: datetime) -> None:
    """A budget whose permit could not be relayed backs nothing: it stops taking charges
    (revoked) and the charges it took are failed for good, in the transaction that records
    the failure. Settling them would spend what is left of an earlier permit's allowance,
    which the user gave to another budget."""
    if authorization.status == AuthorizationStatus.ACTIVE:
        authorization.status = AuthorizationStatus.REVOKED
    charges = session.scalars(
        select(Charge).where(Charge.authorization_id == authorization.id,
                             Charge.settlement_status == SettlementStatus.QUEUED)
        .with_for_update()).all()
    abandon_charges(session, charges, f"permit relay failed: {reason}", now)


def _status(authorization: Authorization, kind: TxKind) -> RelayStatus | None:
    if kind is TxKind.PERMIT:
        return authorization.relay_status
    return authorization.revoke_relay_status


def _set_status(session: Session, authorization: Authorization, kind: TxKind,
                status: RelayStatus, reason: str | None, now: datetime) -> None:
    if kind is TxKind.PERMIT:
        authorization.relay_status = status
        if status is RelayStatus.FAILED:
            _permit_failed(session, authorization, reason or "permit refused", now)
    else:
        authorization.revoke_relay_status = status
