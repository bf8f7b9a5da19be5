"""``svc-server dev``'s kept chain (router/dev_chain.py) on a real ledger and a real
in-process chain: taken up when it is the ledger's chain and holds all the ledger saw mined;
a block cut short by a stop is dropped and its transaction sent again; anything else starts
a new chain, sets the file aside, says why, and leaves the ledger's rows as they were."""

from __future__ import annotations

import logging
import os
import shutil
import struct
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.chain.dev_state import header_for
from payments.chain.dev_state_file import MAGIC, read_state, write_state
from payments.chain.models import ChainCursor, ChainTransaction, TxKind, TxStatus
from payments.db import transaction
from payments.ledger.models import Authorization, Charge, SettlementStatus
from payments.models import AllowlistStatus, App
from router.dev_chain import BINDING, DevChain, open_dev_chain
from tests.chain.world import FAST, Crash, World, crash_at, recipient, wallet

PRICE = 10_000
REPO = Path(__file__).resolve().parents[2]


def opened(sessions: sessionmaker[Session], path: Path) -> tuple[DevChain, World]:
    dev = open_dev_chain(sessions, path)
    world = World(sessions, dev.chain)
    return dev, world


def with_app(world: World) -> World:
    world.add_app("game", recipient(0))
    return world


def again(world: World, path: Path) -> tuple[DevChain, World]:
    """The next start on the same ledger and file: the app is the ledger's already."""
    dev, later = opened(world.sessions, path)
    later.apps, later.products, later._keys = world.apps, world.products, world._keys
    return dev, later


def ledger_rows(sessions: sessionmaker[Session]) -> list[tuple[Any, ...]]:
    with sessions() as session:
        return [*((a.id, a.status, a.relay_status, a.spent_atomic, a.relay_tx_hash)
                  for a in session.scalars(select(Authorization).order_by(Authorization.id))),
                *((c.seq, c.settlement_status, c.settlement_tx_hash)
                  for c in session.scalars(select(Charge).order_by(Charge.seq))),
                *((t.id, t.status, t.tx_hash, t.block_number) for t in session.scalars(
                    select(ChainTransaction).order_by(ChainTransaction.id)))]


def cut_last_record(path: Path, keep: int = 11) -> None:
    """The file as a stop in the middle of its last append leaves it: that record's first
    ``keep`` bytes."""
    data = path.read_bytes()
    offset, last = len(MAGIC) + 2, 0
    while offset < len(data):
        last = offset
        (length, _crc) = struct.unpack_from(">II", data, offset)
        offset += 8 + length
    path.write_bytes(data[:last + keep])


def test_a_kept_chain_is_taken_up_with_its_budgets_and_settles_on(
        sessions: sessionmaker[Session], tmp_path: Path) -> None:
    path = tmp_path / "chain-state"
    first, world = opened(sessions, path)
    assert not first.kept and first.note is None  # a first start says nothing
    with_app(world)
    user = wallet(1)
    world.authorize(user)
    seq = world.charge(user)
    world.settle()
    assert world.statuses() == {seq: SettlementStatus.SETTLED}

    dev, later = again(world, path)
    assert dev.kept and dev.note is None
    assert later.chain.allowance(user.address) == 1_000_000 - PRICE
    assert later.balance(recipient(0)) == PRICE
    assert later.chain.allowed_recipient(recipient(0))
    nxt = later.charge(user)  # the same budget, no new permit
    later.settle()
    assert later.statuses() == {seq: SettlementStatus.SETTLED, nxt: SettlementStatus.SETTLED}
    assert later.balance(recipient(0)) == 2 * PRICE


@pytest.mark.parametrize("step", ["relay", "settle"])
def test_a_block_cut_short_is_dropped_and_its_transaction_sent_again(
        sessions: sessionmaker[Session], tmp_path: Path, step: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """A stop between a block mined and its record written: the ledger holds the
    transaction as pending (its receipt was never read), the file lacks its block. The
    chain is taken up without it, and the worker sends the same signed bytes again."""
    path = tmp_path / "chain-state"
    _dev, world = opened(sessions, path)
    with_app(world)
    user = wallet(2)
    world.authorize(user)
    if step == "relay":
        with pytest.raises(Crash):
            world.relayer(crash_at("broadcast")).run_once()
    else:
        world.relayer().run_once()
        seq = world.charge(user)
        with pytest.raises(Crash):
            world.worker(crash_at("broadcast"), FAST).run_once()
    with sessions() as session:
        pending = session.scalars(select(ChainTransaction).where(
            ChainTransaction.status == TxStatus.PENDING)).one()
    assert world.chain.receipt(pending.tx_hash or "") is not None  # mined in that run
    cut_last_record(path)
    before = ledger_rows(sessions)

    with caplog.at_level(logging.WARNING, logger="router.dev_chain"):
        dev, later = again(world, path)
    assert dev.kept and dev.note is None
    assert "ended in a block cut short" in caplog.text
    assert later.chain.receipt(pending.tx_hash or "") is None  # not on the kept chain
    assert ledger_rows(sessions) == before
    later.settle()
    with sessions() as session:
        resent = session.get(ChainTransaction, pending.id)
        assert resent is not None and resent.status == TxStatus.CONFIRMED
    assert later.chain.receipt(pending.tx_hash or "") is not None  # the same bytes, mined
    if step == "relay":
        assert later.chain.allowance(user.address) == 1_000_000
    else:
        assert later.statuses() == {seq: SettlementStatus.SETTLED}
        assert later.balance(recipient(0)) == PRICE
    assert again(later, path)[0].kept  # and the file holds the resent block too


def test_a_server_killed_at_any_moment_keeps_every_block_it_reported_mined(
        db_url: str, sessions: sessionmaker[Session], tmp_path: Path) -> None:
    """SIGKILL while blocks are being mined: each block's record is on disk before its
    transaction is reported mined, so the chain taken up holds at least every block the
    killed process had reported."""
    path = tmp_path / "chain-state"
    script = textwrap.dedent(f"""
        from payments.db import make_engine, make_sessionmaker
        from router.dev_chain import open_dev_chain
        chain = open_dev_chain(make_sessionmaker(make_engine({db_url!r})),
                               Path({str(path)!r})).chain
        while True:
            print(chain.faucet({recipient(3)!r}, 1).block_number, flush=True)
    """).replace("from payments", "from pathlib import Path\nfrom payments", 1)
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}) as child:
        assert child.stdout is not None
        reported = [int(child.stdout.readline()) for _ in range(25)]
        child.kill()  # SIGKILL: no handler runs, no buffer is flushed
        reported += [int(line) for line in child.stdout.read().split()]
        child.wait(timeout=10)

    dev = open_dev_chain(sessions, path)
    assert dev.kept
    assert dev.chain.block_number() >= reported[-1]
    assert dev.chain.usdc_balance(recipient(3)) >= len(reported)


def test_a_file_behind_the_ledger_starts_a_new_chain_and_leaves_the_ledger(
        sessions: sessionmaker[Session], tmp_path: Path) -> None:
    path = tmp_path / "chain-state"
    _dev, world = opened(sessions, path)
    with_app(world)
    shutil.copy(path, tmp_path / "older")  # before the budget's permit was relayed
    user = wallet(3)
    world.authorize(user)
    world.relayer().run_once()
    with sessions() as session:
        relay = session.scalars(select(ChainTransaction).where(
            ChainTransaction.kind == TxKind.PERMIT)).one()
    shutil.copy(tmp_path / "older", path)
    before = ledger_rows(sessions)

    dev, later = again(world, path)
    assert not dev.kept
    assert dev.note is not None
    assert (f"The database holds 1 active budget(s) and 1 mined chain transaction(s) of an "
            f"earlier in-process chain, which was not taken up: it lacks transaction "
            f"{relay.tx_hash}, which the database records as mined in block "
            f"{relay.block_number}") in dev.note
    assert f"It was moved to {path}.rejected." in dev.note
    assert f"delete {tmp_path} (your console account" in dev.note
    assert (tmp_path / "chain-state.rejected").read_bytes() == (tmp_path / "older").read_bytes()
    assert ledger_rows(sessions) == before
    assert later.chain.allowance(user.address) == 0  # a new chain: the permit is not on it
    assert later.chain.allowed_recipient(recipient(0))  # the ledger's allowlist is
    assert again(later, path)[0].kept  # the new chain is the one kept from now on


def _other_genesis(sessions: sessionmaker[Session], path: Path) -> str:
    with transaction(sessions) as session:
        row = session.get(ChainCursor, BINDING)
        assert row is not None
        row.position = "ab" * 32
    return "another chain than the database's"


def _other_version(sessions: sessionmaker[Session], path: Path) -> str:
    state = read_state(path)
    write_state(path, replace(state.header, py_evm="0.0.1"), state.pairs)
    return "it was written by py-evm 0.0.1"


def _other_contracts(sessions: sessionmaker[Session], path: Path) -> str:
    state = read_state(path)
    write_state(path, replace(state.header, contracts="0" * 64), state.pairs)
    return "its contracts were deployed from other artifacts than this checkout's"


def _unreadable(sessions: sessionmaker[Session], path: Path) -> str:
    data = bytearray(path.read_bytes())
    data[len(MAGIC)] = 9  # the format version
    path.write_bytes(bytes(data))
    return f"{path} cannot be read: it is in format version 2305; this code reads 1"


@pytest.mark.parametrize("spoil", [_other_genesis, _other_version, _other_contracts,
                                   _unreadable])
def test_a_file_not_of_this_ledger_or_code_is_set_aside(
        sessions: sessionmaker[Session], tmp_path: Path, spoil: Any) -> None:
    path = tmp_path / "chain-state"
    _first, world = opened(sessions, path)
    with_app(world)
    user = wallet(4)
    world.authorize(user)
    world.relayer().run_once()
    why = spoil(sessions, path)
    before = ledger_rows(sessions)

    dev, later = again(world, path)
    assert not dev.kept and dev.note is not None
    assert why in dev.note and "1 active budget(s) and 1 mined" in dev.note
    assert (tmp_path / "chain-state.rejected").exists()
    assert ledger_rows(sessions) == before
    assert later.chain.allowance(user.address) == 0
    with sessions() as session:  # the ledger now names the new chain
        row = session.get(ChainCursor, BINDING)
        assert row is not None
        assert "0x" + (row.position or "") == read_state(path).header.genesis
        assert row.block == 1  # the relay's row, of the chain set aside


def test_a_new_database_beside_an_old_file_starts_a_new_chain_quietly(
        sessions: sessionmaker[Session], tmp_path: Path, sqlite_template: Path) -> None:
    """svc.db deleted, chain-state kept: the file is of no ledger's; a new chain, said in
    one line (the empty ledger lost nothing)."""
    path = tmp_path / "chain-state"
    write_state(path, header_for("0x" + "cd" * 32), {b"k": b"v"})
    dev = open_dev_chain(sessions, path)
    assert not dev.kept
    assert dev.note == ("The in-process chain was not taken up: the database names no chain "
                        f"of its own (it was made after this file). It was moved to "
                        f"{path}.rejected. A new chain was started.")
    missing = open_dev_chain(sessions, tmp_path / "none")
    assert missing.note is None  # a first start


def test_the_ledgers_allowlist_decisions_reach_a_kept_chain(
        sessions: sessionmaker[Session], tmp_path: Path) -> None:
    """`svc-ops allowlist remove` in dev writes the ledger; a kept chain still allowlists
    the address, so the start (and every cycle) removes it, as it adds what is allowed."""
    path = tmp_path / "chain-state"
    _dev, world = opened(sessions, path)
    with_app(world)
    world.add_app("other", recipient(1), allowlisted=False)
    with transaction(sessions) as session:
        for app in session.scalars(select(App)):
            app.recipient_allowlist_status = (AllowlistStatus.NOT_ALLOWED
                                              if app.slug == "game" else AllowlistStatus.ALLOWED)
    dev, later = again(world, path)
    assert dev.kept
    assert not later.chain.allowed_recipient(recipient(0))
    assert later.chain.allowed_recipient(recipient(1))

