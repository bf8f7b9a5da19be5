"""Many settlement workers on PostgreSQL claim with SKIP LOCKED: no charge twice, none lost.
Relayers racing for one pending permit send it once."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

from sqlalchemy import select

from payments.chain.batching import BatchPolicy
from payments.chain.in_process import RELAYER_KEY
from payments.chain.models import ChainTransaction, ChargeRetry, TxKind, TxStatus
from payments.chain.relayer import Relayer
from payments.chain.settlement import SettlementWorker
from payments.ledger.models import (
    AuthorizationStatus,
    RelayStatus,
    SettlementBatch,
    SettlementStatus,
)
from tests.chain.world import World, recipient, wallet


def test_two_workers_with_their_own_keys_share_the_queue(pg_world: World) -> None:
    world = pg_world
    users = [wallet(i) for i in range(3)]
    for user in users:
        world.authorize(user)
    world.relayer().run_once()
    seqs = [world.charge(users[i % 3]) for i in range(30)]
    policy = BatchPolicy(max_charges=4, max_age=timedelta(0), unsent_grace=timedelta(hours=1),
                         receipt_timeout=5.0)
    chains = [world.chain, world.evm.with_relayer((1000 + 1).to_bytes(32, "big"))]
    workers = [SettlementWorker(world.sessions, chain, policy=policy) for chain in chains]
    errors: list[BaseException] = []
    start = threading.Barrier(len(workers))

    def drain(worker: SettlementWorker) -> None:
        start.wait()
        try:
            for _ in range(20):
                worker.run_once(max_batches=1)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=drain, args=(w,)) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []

    assert world.statuses() == dict.fromkeys(seqs, SettlementStatus.SETTLED)
    logs = world.chain.charge_settled_logs(0, world.chain.block_number())
    assert Counter(int.from_bytes(lg.charge_id, "big") for lg in logs) == dict.fromkeys(seqs, 1)
    assert world.events("payment.settled") == dict.fromkeys(seqs, 1)
    with world.sessions() as session:
        senders = set(session.scalars(select(ChainTransaction.sender).where(
            ChainTransaction.kind == TxKind.CHARGE_BATCH)))
    assert senders == {chain.relayer for chain in chains}


def test_two_relayers_racing_for_one_permit_send_it_once(any_world: World) -> None:
    """Two chain workers (one key each, or one key by mistake) both read a pending budget and
    sign its relay before either records it. The second to record must find the first's
    transaction in flight and stand down: had it sent its own too, whichever was mined
    second would revert (the permit's nonce is spent), and that revert revoked the budget
    the other had relayed, failing its charges for good."""
    world = any_world
    user = wallet(0)
    authorization_id = world.authorize(user)
    b_signed, a_recorded, b_done = threading.Event(), threading.Event(), threading.Event()

    def first(point: str) -> None:
        if point == "signed":
            assert b_signed.wait(10)
        elif point == "recorded":
            a_recorded.set()
            b_done.wait(10)  # B records (or refuses) while A's transaction is in flight

    def second(point: str) -> None:
        if point == "signed":
            b_signed.set()
            assert a_recorded.wait(10)

    other = world.evm.with_relayer((2000).to_bytes(32, "big"))
    errors: list[BaseException] = []

    def run(relayer: Relayer, done: threading.Event | None) -> None:
        try:
            relayer.run_once()
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            if done is not None:
                done.set()

    threads = [threading.Thread(target=run, args=(world.relayer(first), None)),
               threading.Thread(target=run, args=(
                   Relayer(world.sessions, other, checkpoint=second, receipt_timeout=5.0),
                   b_done))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []

    budget = world.authorization(authorization_id)
    assert (budget.status, budget.relay_status) == (AuthorizationStatus.ACTIVE,
                                                    RelayStatus.RELAYED)
    with world.sessions() as session:
        sent = session.scalars(select(ChainTransaction.status).where(
            ChainTransaction.kind == TxKind.PERMIT,
            ChainTransaction.authorization_id == authorization_id)).all()
    assert sent == [TxStatus.CONFIRMED]
    assert world.chain.allowance(user.address) == 1_000_000


def _txs(world: World, kind: TxKind) -> list[tuple[TxStatus, int | None]]:
    with world.sessions() as session:
        return [(tx.status, tx.nonce) for tx in session.scalars(
            select(ChainTransaction).where(ChainTransaction.kind == kind)
            .order_by(ChainTransaction.id))]


def test_two_workers_on_one_key_lose_a_nonce_race_without_waiting_or_doubling(
        any_world: World) -> None:
    """Two chain workers started with one relayer key (the mistake docs/deploy.md warns of):
    each remembers its next nonce, so one signs a nonce the other has used. The node refuses
    it; that transaction can never be mined, so its batch is dropped on the spot, its charges
    queued again unblamed, and the worker asks the node for its next nonce. (Before, it was
    taken for "already sent": the worker waited out its receipt timeout, and with a pool
    holding the other's transaction, kept its charges claimed until that one was mined.)"""
    world = any_world
    twin = world.evm.with_relayer(RELAYER_KEY)  # the same key, its own memory of nonces
    assert twin.relayer == world.chain.relayer
    policy = BatchPolicy(max_age=timedelta(0), unsent_grace=timedelta(hours=1),
                         receipt_timeout=2.0)
    relayer_a, relayer_b = world.relayer(), Relayer(world.sessions, twin, receipt_timeout=2.0)
    worker_b = SettlementWorker(world.sessions, twin, policy=policy)
    users = [wallet(i) for i in range(3)]

    world.authorize(users[0])
    assert relayer_b.run_once() == 1  # B's next nonce is now remembered as k + 1
    world.authorize(users[1])
    assert relayer_a.run_once() == 1  # A asks the node: k + 1, mined
    first = [world.charge(users[0]), world.charge(users[1])]

    report = worker_b.run_once(max_batches=1)  # B signs k + 1 again

    assert len(report.batches) == 1 and report.settled == report.failed == 0
    with world.sessions() as session:
        batch = session.get(SettlementBatch, report.batches[0])
        assert batch is not None and batch.status == SettlementStatus.FAILED
        assert session.scalars(select(ChargeRetry).where(ChargeRetry.charge_seq.in_(first))
                               ).all() == []  # nobody blamed
    taken = _txs(world, TxKind.PERMIT)[1][1]
    assert taken is not None
    assert _txs(world, TxKind.CHARGE_BATCH) == [(TxStatus.DROPPED, taken)]
    assert world.statuses() == dict.fromkeys(first, SettlementStatus.QUEUED)

    report = worker_b.run_once(max_batches=1)  # the node's count this time: k + 2
    assert report.settled == 2
    assert _txs(world, TxKind.CHARGE_BATCH)[1] == (TxStatus.CONFIRMED, taken + 1)

    # The relayer the same way: A remembers k + 2, which B's batch used.
    third = world.authorize(users[2])
    assert relayer_a.run_once() == 0
    assert world.authorization(third).relay_status == RelayStatus.PENDING
    assert _txs(world, TxKind.PERMIT)[2] == (TxStatus.DROPPED, taken + 1)
    assert relayer_a.run_once() == 1
    assert _txs(world, TxKind.PERMIT)[3] == (TxStatus.CONFIRMED, taken + 2)
    assert world.authorization(third).relay_status == RelayStatus.RELAYED

    assert world.statuses() == dict.fromkeys(first, SettlementStatus.SETTLED)
    logs = world.chain.charge_settled_logs(0, world.chain.block_number())
    assert Counter(int.from_bytes(lg.charge_id, "big") for lg in logs) == dict.fromkeys(first, 1)
    assert world.events("payment.settled") == dict.fromkeys(first, 1)
    assert world.balance(recipient(0)) == sum(c.amount_atomic for c in world.charges().values())


def test_a_worker_never_signs_again_another_keys_pending_batch(pg_world: World) -> None:
    """Fee replacement (docs/chain.md) is for a worker's own transactions: another key's
    pending batch is resolved and sent again as it is, never re-signed (it cannot be)."""
    world = pg_world
    user = wallet(0)
    world.authorize(user)
    world.relayer().run_once()
    other = world.evm.with_relayer((3000).to_bytes(32, "big"))
    eager = BatchPolicy(max_age=timedelta(0), unsent_grace=timedelta(hours=1),
                        receipt_timeout=0.2, replace_after=timedelta(0))
    seqs = [world.charge(user)]
    world.evm.set_automine(False)
    try:
        (batch_id,) = SettlementWorker(world.sessions, other, policy=eager).run_once().batches
        report = SettlementWorker(world.sessions, world.chain, policy=eager).run_once()
        assert report.batches == [] and report.settled == 0
        with world.sessions() as session:
            sent = session.scalars(select(ChainTransaction).where(
                ChainTransaction.batch_id == batch_id)).all()
        assert [(tx.status, tx.sender) for tx in sent] == [(TxStatus.PENDING, other.relayer)]
    finally:
        world.evm.set_automine(True)
    SettlementWorker(world.sessions, world.chain, policy=eager).run_once()
    assert world.statuses() == dict.fromkeys(seqs, SettlementStatus.SETTLED)
