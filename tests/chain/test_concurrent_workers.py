"""Many settlement workers on PostgreSQL claim with SKIP LOCKED: no charge twice, none lost."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

from sqlalchemy import select

from payments.chain.batching import BatchPolicy
from payments.chain.models import ChainTransaction, TxKind
from payments.chain.settlement import SettlementWorker
from payments.ledger.models import SettlementStatus
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
