"""Kill the workers at every step; a restarted worker settles each charge exactly once."""

from __future__ import annotations

from collections import Counter

import pytest
from sqlalchemy import select

from payments.chain.models import ChainTransaction, TxKind, TxStatus
from payments.ledger.models import DeliveryStatus, RelayStatus, SettlementBatch, SettlementStatus
from tests.chain.world import Crash, World, crash_at, recipient, wallet

SETTLEMENT_STEPS = ["claimed", "signed", "recorded", "broadcast", "receipt", "applying",
                    "applied"]


def _charges(world: World) -> list[int]:
    alice, bob = wallet(0), wallet(1)
    world.authorize(alice)
    world.authorize(bob)
    world.relayer().run_once()
    return [world.charge(alice), world.charge(bob), world.charge(alice, product="sword"),
            world.charge(bob)]


def _assert_settled_exactly_once(world: World, seqs: list[int], paid_before: int) -> None:
    assert world.statuses() == dict.fromkeys(seqs, SettlementStatus.SETTLED)
    logs = world.chain.charge_settled_logs(0, world.chain.block_number())
    assert Counter(int.from_bytes(lg.charge_id, "big") for lg in logs) == dict.fromkeys(seqs, 1)
    assert world.balance(recipient(0)) - paid_before == 3 * 10_000 + 100_000
    assert world.events("payment.settled") == dict.fromkeys(seqs, 1)
    assert world.events("payment.delivered")[seqs[2]] == 1
    assert world.delivery(seqs[2]).status == DeliveryStatus.DELIVERED
    with world.sessions() as session:
        batches = session.scalars(select(SettlementBatch)).all()
        assert SettlementStatus.SETTLING not in {b.status for b in batches}
        assert session.scalars(select(ChainTransaction).where(
            ChainTransaction.status == TxStatus.PENDING)).all() == []


@pytest.mark.parametrize("step", SETTLEMENT_STEPS)
def test_settlement_worker_crash_at_each_step(world: World, step: str) -> None:
    seqs = _charges(world)
    paid_before = world.balance(recipient(0))
    with pytest.raises(Crash):
        world.worker(crash_at(step)).run_once()

    restarted = world.worker()
    restarted.run_once()
    restarted.run_once()

    _assert_settled_exactly_once(world, seqs, paid_before)


def test_a_recorded_batch_whose_nonce_went_elsewhere_is_requeued(world: World) -> None:
    seqs = _charges(world)
    paid_before = world.balance(recipient(0))
    with pytest.raises(Crash):
        world.worker(crash_at("recorded")).run_once()  # signed, never sent
    with world.sessions() as session:
        lost = session.scalars(select(ChainTransaction).where(
            ChainTransaction.kind == TxKind.CHARGE_BATCH)).one()
    # Before the worker restarts, the relayer sends a renewal with that same nonce.
    world.authorize(wallet(2))
    world.relayer().run_once()

    restarted = world.worker()
    restarted.run_once()
    restarted.run_once()

    with world.sessions() as session:
        dropped = session.get(ChainTransaction, lost.id)
        assert dropped is not None and dropped.status == TxStatus.DROPPED
        assert world.chain.receipt(str(lost.tx_hash)) is None
    _assert_settled_exactly_once(world, seqs, paid_before)


@pytest.mark.parametrize("step", ["signed", "recorded", "broadcast"])
def test_relayer_crash_at_each_step(world: World, step: str) -> None:
    user = wallet(0)
    auth = world.authorize(user)
    with pytest.raises(Crash):
        world.relayer(crash_at(step)).run_once()

    world.relayer().run_once()

    assert world.authorization(auth).relay_status == RelayStatus.RELAYED
    assert world.chain.permit_nonce(user.address) == 1
    assert world.chain.allowance(user.address) == 1_000_000
