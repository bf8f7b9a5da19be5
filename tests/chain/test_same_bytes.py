"""Signing again after a drop can give the very bytes of the dropped transaction: the node
reports the same nonce again and the fees have not moved. Those bytes are one transaction,
one row: the dropped row is pending again, for the new batch or the same relay, and sent
(before, the second insert of the hash failed every cycle until a fee or nonce changed)."""

from __future__ import annotations

import pytest
from sqlalchemy import select, update

from payments.chain.gateway import NonceTaken, SignedTx
from payments.chain.models import ChainTransaction, TxKind, TxStatus
from payments.chain.reconcile import Reconciler
from payments.chain.tx_records import record_signed
from payments.db import transaction, utcnow
from payments.ledger.models import Charge, RelayStatus, SettlementBatch, SettlementStatus
from tests.chain.world import World, recipient, wallet


def refuse_next_send(world: World, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The node refuses the next transaction as "nonce too low" and still reports that
    nonce as the next: a lagging replica behind a provider's load balancer, the edge of the
    world (no node we can run here answers so). Returns the refused hashes."""
    refused: list[str] = []
    send = world.chain.broadcast

    def broadcast(tx: SignedTx) -> None:
        if not refused:
            refused.append(tx.tx_hash)
            raise NonceTaken("nonce too low")
        send(tx)

    monkeypatch.setattr(world.chain, "broadcast", broadcast)
    return refused


def rows(world: World, kind: TxKind) -> list[ChainTransaction]:
    with world.sessions() as session:
        return list(session.scalars(select(ChainTransaction)
                                    .where(ChainTransaction.kind == kind)))


def test_a_batch_signed_again_into_the_same_bytes_is_sent(
        any_world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world = any_world
    user = wallet(0)
    world.authorize(user)
    world.relayer().run_once()
    seqs = [world.charge(user), world.charge(user)]
    before = world.balance(recipient(0))
    refused = refuse_next_send(world, monkeypatch)

    world.worker().run_once(max_batches=1)  # dropped: the charges queued again, unblamed
    assert set(world.statuses().values()) == {SettlementStatus.QUEUED}
    [dropped] = rows(world, TxKind.CHARGE_BATCH)
    assert (dropped.tx_hash, dropped.status) == (refused[0], TxStatus.DROPPED)

    world.worker().run_once(max_batches=1)  # the same charges, nonce, fees: same bytes

    charges = world.charges()
    assert {charges[s].settlement_status for s in seqs} == {SettlementStatus.SETTLED}
    assert {charges[s].settlement_tx_hash for s in seqs} == {refused[0]}
    assert world.balance(recipient(0)) - before == 2 * 10_000
    [row] = rows(world, TxKind.CHARGE_BATCH)
    with world.sessions() as session:
        batches = {b.id: b for b in session.scalars(select(SettlementBatch))}
    assert (row.status, row.error, batches[str(row.batch_id)].status) == (
        TxStatus.CONFIRMED, None, SettlementStatus.SETTLED)
    assert sorted(b.status for b in batches.values()) == [SettlementStatus.FAILED,
                                                          SettlementStatus.SETTLED]
    assert {b.tx_hash for b in batches.values()} == {refused[0]}  # the failed one keeps it

    # A restored ledger: reconciliation settles the charges again from the log, in the batch
    # the transaction's row names, not the failed one that also has its hash.
    with transaction(world.sessions) as session:
        session.execute(update(Charge).where(Charge.seq.in_(seqs)).values(
            settlement_status=SettlementStatus.QUEUED, settlement_tx_hash=None,
            batch_id=None))
    Reconciler(world.sessions, world.chain).run(from_block=0)
    charges = world.charges()
    assert {(charges[s].settlement_status, charges[s].batch_id) for s in seqs} == {
        (SettlementStatus.SETTLED, row.batch_id)}


def test_a_relay_signed_again_into_the_same_bytes_is_sent(
        any_world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world = any_world
    user = wallet(0)
    budget = world.authorize(user)
    refused = refuse_next_send(world, monkeypatch)

    assert world.relayer().run_once() == 0
    [dropped] = rows(world, TxKind.PERMIT)
    assert (dropped.tx_hash, dropped.status) == (refused[0], TxStatus.DROPPED)

    assert world.relayer().run_once() == 1

    [row] = rows(world, TxKind.PERMIT)
    assert (row.tx_hash, row.status, row.authorization_id) == (
        refused[0], TxStatus.CONFIRMED, budget)
    relayed = world.authorization(budget)
    assert (relayed.relay_status, relayed.relay_tx_hash) == (RelayStatus.RELAYED, refused[0])
    assert world.chain.allowance(user.address) == 1_000_000


@pytest.mark.parametrize("status", [TxStatus.CONFIRMED, TxStatus.REVERTED, TxStatus.PENDING])
def test_bytes_recorded_as_mined_or_in_flight_are_not_sent_as_new(
        any_world: World, status: TxStatus) -> None:
    world = any_world
    signed = SignedTx(world.chain.relayer, 7, "0x" + "ab" * 32, "0x02f8")
    with transaction(world.sessions) as session:
        session.add(ChainTransaction(kind=TxKind.CHARGE_BATCH, status=status,
                                     sender=signed.sender, nonce=7, tx_hash=signed.tx_hash,
                                     raw=signed.raw, created_at=utcnow()))
    with transaction(world.sessions) as session:
        assert not record_signed(session, signed, utcnow(), TxKind.CHARGE_BATCH)
        assert not record_signed(session, signed, utcnow(), TxKind.PERMIT)
    [row] = rows(world, TxKind.CHARGE_BATCH)
    assert (row.status, row.batch_id) == (status, None)
    assert rows(world, TxKind.PERMIT) == []
