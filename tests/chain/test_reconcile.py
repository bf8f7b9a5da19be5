"""Reconciliation finds each kind of drift; it repairs the safe ones and reports the rest."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import select, text, update

from payments.chain.contracts import charge_id
from payments.chain.in_process import RELAYER_KEY
from payments.chain.models import ChainFinding, FindingKind
from payments.chain.reconcile import Reconciler, ReconcileReport
from payments.chain.web3_chain import Web3Chain
from payments.db import transaction
from payments.ledger.models import (
    Charge,
    Delivery,
    DeliveryStatus,
    SettlementBatch,
    SettlementStatus,
)
from tests.chain.world import Crash, World, crash_at, recipient, wallet

S = SettlementStatus


def _settled(world: World, products: tuple[str, ...] = ("retry",)) -> list[int]:
    user = wallet(0)
    world.authorize(user)
    world.relayer().run_once()
    seqs = [world.charge(user, product=p) for p in products]
    world.worker().run_once()
    assert set(world.statuses().values()) == {S.SETTLED}
    return seqs


def _tamper(world: World, seq: int, **values: Any) -> None:
    with transaction(world.sessions) as session:
        session.execute(update(Charge).where(Charge.seq == seq).values(**values))


def _findings(world: World) -> dict[FindingKind, set[int | None]]:
    found: dict[FindingKind, set[int | None]] = {}
    with world.sessions() as session:
        for row in session.scalars(select(ChainFinding)):
            found.setdefault(row.kind, set()).add(row.charge_seq)
    found.pop(FindingKind.REPAIRED, None)
    return found


def test_a_clean_ledger_has_nothing_to_report_twice(world: World) -> None:
    _settled(world, ("retry", "sword"))
    first = Reconciler(world.sessions, world.chain).run()
    assert (first.logs, first.findings, first.repaired) == (2, [], [])
    world.evm.mine(3)
    again = Reconciler(world.sessions, world.chain).run()
    assert again.from_block == first.to_block + 1 and again.logs == 0
    assert again.findings == [] and _findings(world) == {}


def test_settlement_the_ledger_missed_is_repaired(world: World) -> None:
    user = wallet(0)
    world.authorize(user)
    world.relayer().run_once()
    seqs = [world.charge(user), world.charge(user, product="sword")]
    with pytest.raises(Crash):  # mined, but the worker died before writing it down
        world.worker(crash_at("receipt")).run_once()
    assert set(world.statuses().values()) == {S.SETTLING}

    report = Reconciler(world.sessions, world.chain).run()

    assert world.statuses() == dict.fromkeys(seqs, S.SETTLED)
    assert world.delivery(seqs[1]).status == DeliveryStatus.DELIVERED
    assert world.events("payment.settled") == dict.fromkeys(seqs, 1)
    assert any(r.startswith("batch ") for r in report.repaired)
    with world.sessions() as session:
        assert session.scalars(select(SettlementBatch.status)).one() == S.SETTLED
    assert report.findings == []
    world.worker().run_once()  # the restarted worker finds nothing left to do
    assert world.events("payment.settled") == dict.fromkeys(seqs, 1)


def test_a_failed_charge_with_a_log_and_a_waiting_delivery_are_repaired(world: World) -> None:
    plain, sword = _settled(world, ("retry", "sword"))
    _tamper(world, plain, settlement_status=S.FAILED)
    with transaction(world.sessions) as session:
        session.execute(update(Delivery).where(Delivery.charge_seq == sword).values(
            status=DeliveryStatus.AWAITING_SETTLEMENT))

    report = Reconciler(world.sessions, world.chain).run()

    assert world.statuses()[plain] == S.SETTLED
    assert world.delivery(sword).status == DeliveryStatus.DELIVERED
    assert len(report.repaired) == 2 and report.findings == []


@pytest.mark.parametrize(("column", "value", "kind"), [
    ("amount_atomic", 20_000, FindingKind.AMOUNT_MISMATCH),
    ("pay_to", recipient(5), FindingKind.RECIPIENT_MISMATCH),
    ("owner_wallet", wallet(5).address.lower(), FindingKind.PAYER_MISMATCH),
])
def test_money_drift_is_reported_not_repaired(world: World, column: str, value: object,
                                              kind: FindingKind,
                                              caplog: pytest.LogCaptureFixture) -> None:
    (seq,) = _settled(world)
    _tamper(world, seq, settlement_status=S.SETTLING, **{column: value})

    with caplog.at_level(logging.WARNING, logger="payments.chain.settlement_states"):
        report = Reconciler(world.sessions, world.chain).run()
        Reconciler(world.sessions, world.chain).run()  # known: not logged again

    assert report.findings == [f"{kind.value}:{seq}"]
    assert _findings(world) == {kind: {seq}}
    assert world.statuses()[seq] == S.SETTLING  # left for an operator
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"chain finding {kind.value}: charge {seq}, batch None, tx 0x")


def test_a_transfer_in_another_token_is_reported(world: World) -> None:
    _settled(world)
    chain = world.chain
    elsewhere = Web3Chain(world.evm.w3, replace(chain.params, token=recipient(7)),
                          RELAYER_KEY)

    report = Reconciler(world.sessions, elsewhere).run()

    assert [f.split(":")[0] for f in report.findings] == [FindingKind.TOKEN_MISMATCH.value]


def test_settled_in_the_ledger_without_an_event_is_reported(world: World) -> None:
    (seq,) = _settled(world)
    user = wallet(0)
    other = world.charge(user)  # never sent, yet the ledger is told it settled
    _tamper(world, other, settlement_status=S.SETTLED,
            settlement_tx_hash=world.charges()[seq].settlement_tx_hash)

    report = Reconciler(world.sessions, world.chain).run()

    assert report.findings == [f"{FindingKind.MISSING_EVENT.value}:{other}"]


def test_a_log_for_a_charge_the_ledger_never_made_is_reported(world: World) -> None:
    _settled(world)
    user = wallet(0)
    chain = world.chain
    chain.transact_as(RELAYER_KEY, chain.spender.functions.charge(
        charge_id(10**6), user.address, recipient(0), 1))

    report = Reconciler(world.sessions, world.chain).run()

    assert report.findings == [f"{FindingKind.UNKNOWN_CHARGE.value}:{10**6}"]


def test_settled_by_another_transaction_than_recorded_is_reported(world: World) -> None:
    (seq,) = _settled(world)
    _tamper(world, seq, settlement_tx_hash="0x" + "ab" * 32)

    report = Reconciler(world.sessions, world.chain).run()

    assert sorted(report.findings) == [f"{FindingKind.MISSING_EVENT.value}:{seq}",
                                       f"{FindingKind.TX_MISMATCH.value}:{seq}"]


def _wait_for_a_lock_wait(world: World) -> None:
    """Until a transaction of ``world`` waits for a row lock (PostgreSQL), or a moment
    (SQLite, whose writers wait at BEGIN and show it nowhere)."""
    with world.sessions() as session:
        if session.get_bind().dialect.name != "postgresql":
            time.sleep(0.5)
            return
        for _ in range(200):
            waiting = session.scalar(text(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"))
            session.rollback()  # a fresh snapshot for the next look
            if waiting:
                return
            time.sleep(0.05)
    raise AssertionError("no transaction waited for a lock")


def test_a_reconciler_racing_the_worker_settles_each_charge_once(any_world: World) -> None:
    """Chain workers each run reconciliation (docs/chain.md, "Keys and processes"): one's
    reconciler may find a batch's logs while another worker is applying that batch. It
    read the charges ``settling`` and repaired them as drift after the worker had settled
    them: a second ``payment.settled`` for the same charge, under another event id."""
    world = any_world
    user = wallet(0)
    world.authorize(user)
    world.relayer().run_once()
    seqs = [world.charge(user), world.charge(user, product="sword")]
    applying, go = threading.Event(), threading.Event()

    def hold(point: str) -> None:
        if point == "applying":  # inside the worker's apply transaction, rows locked
            applying.set()
            assert go.wait(30)

    errors: list[BaseException] = []
    reports: list[ReconcileReport] = []

    def run(job: Callable[[], object]) -> None:
        try:
            result = job()
            if isinstance(result, ReconcileReport):
                reports.append(result)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    worker = threading.Thread(target=run, args=(world.worker(hold).run_once,))
    worker.start()
    assert applying.wait(30)
    reconciler = threading.Thread(target=run,
                                  args=(Reconciler(world.sessions, world.chain).run,))
    reconciler.start()
    _wait_for_a_lock_wait(world)
    go.set()
    for thread in (worker, reconciler):
        thread.join(60)
    assert errors == []

    assert world.statuses() == dict.fromkeys(seqs, S.SETTLED)
    assert world.events("payment.settled") == dict.fromkeys(seqs, 1)
    assert world.events("payment.delivered") == dict.fromkeys(seqs, 1)
    assert reports and reports[0].repaired == [] and reports[0].findings == []
