"""Whole flows on the in-process EVM: permits relayed, charges batched and settled."""

from __future__ import annotations

import dataclasses
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update

from payments.chain.batching import BatchPolicy
from payments.chain.contracts import charge_id
from payments.chain.gateway import ChainRevert, ChainUnavailable, ChargeSettledLog
from payments.chain.in_process import RELAYER_KEY, InProcessChain
from payments.chain.models import (
    ChainFinding,
    ChainTransaction,
    ChargeRetry,
    FindingKind,
    TxKind,
)
from payments.db import make_engine, make_sessionmaker, transaction, utcnow
from payments.ledger.models import (
    Charge,
    DeliveryStatus,
    RelayStatus,
    SettlementBatch,
    SettlementStatus,
)
from tests.chain.world import FAST, World, recipient, wallet

S = SettlementStatus


def test_permit_relay_then_batch_settles_every_charge(world: World) -> None:
    world.add_app("other", recipient(1))
    users = [wallet(0), wallet(1)]
    auths = [world.authorize(u) for u in users]
    seqs = [world.charge(u, app) for u in users for app in ("game", "other", "game")]
    sword = world.charge(users[0], product="sword")
    before = {a: world.balance(a) for a in (recipient(0), recipient(1))}

    assert world.relayer().run_once() == 2
    for auth, user in zip(auths, users, strict=True):
        row = world.authorization(auth)
        assert row.relay_status == RelayStatus.RELAYED and row.relay_tx_hash
        assert world.chain.allowance(user.address) == 1_000_000
    # settled_first waits for the chain: no payment.delivered yet
    assert world.delivery(sword).status == DeliveryStatus.AWAITING_SETTLEMENT
    assert sword not in world.events("payment.delivered")

    report = world.worker().run_once()

    assert len(report.batches) == 1 and report.settled == 7
    charges = world.charges()
    tx_hash = charges[seqs[0]].settlement_tx_hash
    assert {c.settlement_status for c in charges.values()} == {S.SETTLED}
    assert {c.settlement_tx_hash for c in charges.values()} == {tx_hash}
    assert all(c.settled_at is not None for c in charges.values())
    receipt = world.chain.receipt(str(tx_hash))
    assert receipt is not None and receipt.succeeded
    assert sorted(int.from_bytes(c.charge_id, "big") for c in receipt.charges) == sorted(
        [*seqs, sword])
    assert len(receipt.transfers) == 4  # 2 owners x 2 recipients, netted per pair
    assert world.balance(recipient(0)) - before[recipient(0)] == 4 * 10_000 + 100_000
    assert world.balance(recipient(1)) - before[recipient(1)] == 2 * 10_000
    assert world.events("payment.settled") == dict.fromkeys([*seqs, sword], 1)
    assert world.events("payment.delivered")[sword] == 1
    assert world.delivery(sword).status == DeliveryStatus.DELIVERED
    with world.sessions() as session:
        batch = session.scalars(select(SettlementBatch)).one()
        assert (batch.status, batch.tx_hash) == (S.SETTLED, tx_hash)
        assert batch.tx_nonce is not None


def test_flush_waits_for_size_or_age(world: World) -> None:
    user = wallet(0)
    world.authorize(user)
    world.relayer().run_once()
    for _ in range(3):
        world.charge(user)
    now = utcnow()
    patient = BatchPolicy(max_charges=4, max_age=timedelta(minutes=1))
    assert world.worker(policy=patient).run_once().batches == []
    world.charge(user)
    assert len(world.worker(policy=patient).run_once().batches) == 1  # full
    world.charge(user)
    later = world.worker(policy=patient)
    assert later.run_once().batches == []
    aged = type(later)(world.sessions, world.chain, policy=patient,
                       clock=lambda: now + timedelta(minutes=2))
    assert len(aged.run_once().batches) == 1  # old enough
    assert set(world.statuses().values()) == {S.SETTLED}


def test_charges_wait_for_their_permit(world: World) -> None:
    user = wallet(0)
    world.authorize(user)
    seq = world.charge(user)
    assert world.worker().run_once().batches == []  # permit not relayed yet
    assert world.statuses()[seq] == S.QUEUED
    world.settle()
    assert world.statuses()[seq] == S.SETTLED


def test_charges_queued_before_a_revoke_settle_before_it_is_relayed(world: World) -> None:
    """The ledger accepted them before the revoke (the optimistic one delivered at once):
    the revoke waits for their settlement attempt. It used to go first, in the same cycle,
    and they failed on chain: a user could buy and revoke at once and not pay."""
    alice, bob = wallet(0), wallet(1)
    world.authorize(alice)
    world.authorize(bob)
    world.relayer().run_once()
    queued = [world.charge(alice), world.charge(alice, product="sword")]
    bobs = world.charge(bob)
    world.revoke(alice, nonce=1)
    assert world.relayer().run_once() == 0  # the revoke waits for alice's charges
    assert world.chain.allowance(alice.address) == 1_000_000

    world.worker().run_once()

    assert world.statuses() == dict.fromkeys([*queued, bobs], S.SETTLED)
    assert world.delivery(queued[1]).status == DeliveryStatus.DELIVERED  # settled_first
    assert world.events("payment.settled") == dict.fromkeys([*queued, bobs], 1)
    assert world.relayer().run_once() == 1  # now the revoke
    assert world.chain.allowance(alice.address) == 0


def test_a_revoke_past_its_hold_fails_the_queued_charges_cleanly(world: World) -> None:
    """A settlement stuck past the hold no longer holds the revoke: sent, it leaves the
    charges still queued without allowance, and they fail, the rest of the batch settling."""
    alice, bob = wallet(0), wallet(1)
    world.authorize(alice)
    world.authorize(bob)
    world.relayer().run_once()
    queued = [world.charge(alice), world.charge(alice, product="sword")]
    bobs = world.charge(bob)
    world.revoke(alice, nonce=1)
    assert world.late_relayer().run_once() == 1  # the revoke, after the permit
    assert world.chain.allowance(alice.address) == 0

    world.worker().run_once()

    statuses = world.statuses()
    assert [statuses[s] for s in queued] == [S.FAILED, S.FAILED]
    assert statuses[bobs] == S.SETTLED  # the rest of the batch settled
    assert world.delivery(queued[1]).status == DeliveryStatus.FAILED  # settled_first
    assert world.delivery(queued[0]).status == DeliveryStatus.DELIVERED  # optimistic
    with world.sessions() as session:
        retry = session.get(ChargeRetry, queued[0])
        assert retry is not None and retry.attempts == 1
        assert retry.last_error == "PairTransferFailed/ERC20InsufficientAllowance"
    assert queued[0] not in world.events("payment.settled")
    assert world.chain.is_settled(charge_id(queued[0])) is False


def test_failed_charges_retry_with_backoff_until_the_limit(world: World) -> None:
    user = wallet(0)
    world.authorize(user)
    world.relayer().run_once()
    seq = world.charge(user)
    world.revoke(user, nonce=1)
    world.late_relayer().run_once()  # past its hold: the charge meets no allowance
    now = utcnow()
    policy = BatchPolicy(max_age=timedelta(0), retry_limit=2,
                         backoff=(timedelta(minutes=1), timedelta(minutes=5)))

    def worker_at(minutes: float) -> None:
        type(world.worker())(world.sessions, world.chain, policy=policy,
                             clock=lambda: now + timedelta(minutes=minutes)).run_once()

    worker_at(0)
    assert world.statuses()[seq] == S.FAILED
    worker_at(0.5)  # not due yet
    assert world.statuses()[seq] == S.FAILED
    worker_at(1.5)  # failed -> queued -> settling -> failed again
    with world.sessions() as session:
        retry = session.get(ChargeRetry, seq)
        assert retry is not None and retry.attempts == 2 and retry.next_attempt_at is None
        kinds = set(session.scalars(select(ChainFinding.kind)))
    assert kinds == {FindingKind.RETRIES_EXHAUSTED}
    worker_at(100)
    assert world.statuses()[seq] == S.FAILED


def test_renewal_lets_a_failed_charge_settle_on_retry(world: World) -> None:
    user = wallet(0)
    world.authorize(user)
    world.relayer().run_once()
    seq = world.charge(user)
    world.revoke(user, nonce=1)
    world.late_relayer().run_once()  # past its hold: the charge meets no allowance
    world.worker().run_once()
    assert world.statuses()[seq] == S.FAILED
    world.authorize(user, fund=False)  # a fresh permit (nonce 2)
    world.relayer().run_once()
    later = utcnow() + timedelta(minutes=2)
    type(world.worker())(world.sessions, world.chain, policy=FAST,
                         clock=lambda: later).run_once()
    assert world.statuses()[seq] == S.SETTLED
    assert world.events("payment.settled") == {seq: 1}


def test_recipient_off_the_allowlist_fails_only_its_charges(world: World) -> None:
    world.add_app("other", recipient(1))
    user = wallet(0)
    world.authorize(user)
    world.relayer().run_once()
    kept = world.charge(user, "game")
    refused = [world.charge(user, "other"), world.charge(user, "other", "sword")]
    world.allow(recipient(1), False)  # the operator removed it

    world.worker().run_once()

    statuses = world.statuses()
    assert statuses[kept] == S.SETTLED
    assert [statuses[s] for s in refused] == [S.FAILED, S.FAILED]
    assert world.delivery(refused[1]).status == DeliveryStatus.FAILED
    assert world.balance(recipient(1)) == 0
    with world.sessions() as session:
        assert session.get(ChargeRetry, refused[0]).last_error == (  # type: ignore[union-attr]
            "RecipientNotAllowed")


def test_a_reused_charge_id_never_moves_money_twice(world: World) -> None:
    user = wallet(0)
    world.authorize(user)
    world.relayer().run_once()
    first = world.charge(user)
    world.worker().run_once()
    paid = world.balance(recipient(0))
    tx_hash = world.charges()[first].settlement_tx_hash
    # A restored ledger forgets the settlement: the charge is queued again.
    with transaction(world.sessions) as session:
        session.execute(update(Charge).where(Charge.seq == first).values(
            settlement_status=S.QUEUED, settlement_tx_hash=None, batch_id=None))
    second = world.charge(user)

    world.worker().run_once()

    charges = world.charges()
    assert charges[first].settlement_status == S.SETTLED
    assert charges[first].settlement_tx_hash == tx_hash  # proven by its original log
    assert charges[second].settlement_status == S.SETTLED
    assert world.balance(recipient(0)) - paid == 10_000  # only the new charge moved money
    assert len(world.chain.charge_settled_logs(0, world.chain.block_number(),
                                               charge_id(first))) == 1


class RangeCappedChain(InProcessChain):
    """The in-process chain behind a node provider's eth_getLogs cap: a stand-in for the
    edge of the world (every hosted provider refuses ranges wider than its own limit, which
    no node we can run here does)."""

    CAP = 4
    asked: list[tuple[int, int]]  # set by the test

    def charge_settled_logs(self, from_block: int, to_block: int,
                            charge_id: bytes | None = None) -> list[ChargeSettledLog]:
        self.asked.append((from_block, to_block))
        if to_block - from_block + 1 > self.CAP:
            raise ChainUnavailable(f"ValueError: block range exceeds {self.CAP}")
        return super().charge_settled_logs(from_block, to_block, charge_id)


def test_a_settlement_log_is_found_a_range_at_a_time_under_a_provider_cap(
        sqlite_template: Path, tmp_path: Path) -> None:
    """A charge the contract says is settled already (its settlement lost by a restored
    ledger) is proven by its log, looked for newest blocks first, never wider than
    ``log_blocks``; asked in one range, the provider's refusal stalled every batch."""
    shutil.copy(sqlite_template, tmp_path / "svc.db")
    engine = make_engine(f"sqlite:///{tmp_path / 'svc.db'}")
    chain = RangeCappedChain.start()
    assert isinstance(chain, RangeCappedChain)
    chain.asked = []
    world = World(make_sessionmaker(engine), chain)
    world.add_app("game", recipient(0))
    user = wallet(0)
    world.authorize(user)
    world.relayer().run_once()
    first = world.charge(user)
    world.worker().run_once()
    tx_hash = world.charges()[first].settlement_tx_hash
    chain.mine(20)
    with transaction(world.sessions) as session:  # the restored ledger
        session.execute(update(Charge).where(Charge.seq == first).values(
            settlement_status=S.QUEUED, settlement_tx_hash=None, batch_id=None))
    second = world.charge(user)

    with pytest.raises(ChainUnavailable, match="exceeds"):  # one range over the cap
        world.worker(policy=dataclasses.replace(FAST, log_blocks=1_000)).run_once()
    assert {world.statuses()[first], world.statuses()[second]} == {S.QUEUED}
    chain.asked = []
    world.worker(policy=dataclasses.replace(FAST, log_blocks=chain.CAP)).run_once()

    charges = world.charges()
    assert (charges[first].settlement_status, charges[first].settlement_tx_hash) == (
        S.SETTLED, tx_hash)
    assert charges[second].settlement_status == S.SETTLED
    assert chain.asked and all(end - start + 1 <= chain.CAP for start, end in chain.asked)
    assert chain.asked[0][1] == max(end for _, end in chain.asked)  # newest first
    engine.dispose()


def test_a_charge_id_settled_by_someone_else_fails_with_a_finding(world: World) -> None:
    """The ledger's sequence restarted (a wiped database) while the chain kept its bitmap."""
    user, stranger = wallet(0), wallet(9)
    world.authorize(user)
    world.relayer().run_once()
    seq = world.charge(user)
    world.faucet(stranger.address, 10**8)
    world.evm.fund_gas(stranger.address)
    world.chain.transact_as(
        stranger.key, world.chain.token.functions.approve(world.chain.spender.address, 10**8))
    world.chain.transact_as(RELAYER_KEY, world.chain.spender.functions
                            .charge(charge_id(seq), stranger.address, recipient(0), 5))

    world.worker().run_once()

    assert world.statuses()[seq] == S.FAILED
    with world.sessions() as session:
        finding = session.scalars(select(ChainFinding)).one()
        assert (finding.kind, finding.charge_seq) == (FindingKind.AMOUNT_MISMATCH, seq)
    assert world.chain.allowance(user.address) == 1_000_000  # the user paid nothing


def test_not_a_relayer_releases_the_claim_without_blame(world: World) -> None:
    user = wallet(0)
    world.authorize(user)
    world.relayer().run_once()
    seq = world.charge(user)
    world.evm.set_relayer(world.chain.relayer, False)
    with pytest.raises(ChainRevert, match="NotRelayer"):
        world.worker().run_once()
    assert world.statuses()[seq] == S.QUEUED
    with world.sessions() as session:
        assert session.get(ChargeRetry, seq) is None
        assert session.scalars(select(ChainTransaction).where(
            ChainTransaction.kind == TxKind.CHARGE_BATCH)).all() == []
