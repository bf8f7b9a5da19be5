"""Many settlement workers on PostgreSQL claim with SKIP LOCKED: no charge twice, none lost.
Relayers racing for one pending permit send it once."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

from sqlalchemy import select

from payments.chain.batching import BatchPolicy
from payments.chain.models import ChainTransaction, TxKind, TxStatus
from payments.chain.relayer import Relayer
from payments.chain.settlement import SettlementWorker
from payments.ledger.models import AuthorizationStatus, RelayStatus, SettlementStatus
from tests.chain.world import World, wallet


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
