"""``svc-server dev`` keeps its in-process chain in ``var/chain-state``, beside the ledger
(``var/svc.db``): a budget relayed and a charge settled in one run are on the chain of the
next, where the budget pays again and the charge settles. A damaged file starts a new chain,
says why, and leaves the ledger's rows as they were (router/dev_chain.py)."""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
from eth_account import Account
from sqlalchemy import select

from payments.chain.dev_state import KeptBackend
from payments.chain.dev_state_file import read_state
from payments.chain.in_process import InProcessChain
from payments.chain.models import ChainFinding
from payments.ledger.models import Charge, Delivery, SettlementStatus
from router.dev import DEMO_PAY_TO
from tests.runtime.test_dev_reference import log_in, service_db
from tests.support.dev_server import DevServer, dev_server
from tests.support.quickstart import quickstart
from tests.support.waits import wait_for

PRICE = 10_000  # the demo app's `retry` (the retry_continue template)
TAKEN_UP = re.compile(r"the in-process chain was taken up from \S+chain-state")


def charge_of(directory: Path, delivery_id: str) -> Charge | None:
    with service_db(directory) as session:
        delivery = session.get(Delivery, delivery_id)
        charge = None if delivery is None else session.scalars(
            select(Charge).where(Charge.seq == delivery.charge_seq)).one()
        session.expunge_all()
    return charge


def settled(directory: Path, delivery_id: str) -> bool:
    charge = charge_of(directory, delivery_id)
    return charge is not None and charge.settlement_status is SettlementStatus.SETTLED


def usdc_balance(server: DevServer, address: str) -> int:
    """What the portal reads from the running server's chain (its public balance read)."""
    answer = httpx.get(server.url + "/api/public/usdc-balance", headers=server.host("portal"),
                       params={"address": address})
    assert answer.status_code == 200, answer.text
    return int(answer.json()["balanceAtomic"])


def kept_chain(directory: Path) -> InProcessChain:
    """The chain in the file, read as the next start reads it; nothing is written."""
    state = read_state(directory / "var" / "chain-state")
    return InProcessChain.resume(KeptBackend(state.pairs))


def pay(server: DevServer, budget: Any, key: str | None = None) -> str:
    player = log_in(server, "Player One")
    with httpx.Client(base_url=server.url, timeout=30) as http:
        delivery_id: str = quickstart.pay_on_runtime(http, server.port, budget, "retry",
                                                     player["user"], key)
    wait_for(lambda: settled(server.directory, delivery_id), 40, "the charge settled",
             poll=0.25)
    return delivery_id


def first_run(directory: Path) -> tuple[Any, str, int]:
    """A new wallet's budget and a settled charge from it: the budget, the delivery and the
    port (a summary code is exchanged only from the runtime origin it was issued to)."""
    wallet = Account.create()
    with dev_server(directory) as first:
        with httpx.Client(base_url=first.url, timeout=30) as http:
            budget = quickstart.authorize_on_runtime(http, first.port, "demo", wallet)
        delivery_id = pay(first, budget)
        assert usdc_balance(first, DEMO_PAY_TO) == PRICE
    assert not TAKEN_UP.search(first.output())  # a first start: a new chain, nothing said
    assert "not taken up" not in first.output()
    return budget, delivery_id, first.port


def ledger_rows(directory: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the ledger's payment and chain tables, as stored."""
    tables = ("authorizations", "charges", "deliveries", "settlement_batches",
              "chain_transactions")
    store = directory / "var" / "svc.db"
    with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        return {t: db.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()  # noqa: S608
                for t in tables}


def test_a_restart_takes_up_the_chain_and_its_budget_pays_again(tmp_path: Path) -> None:
    budget, first_delivery, port = first_run(tmp_path)
    first_charge = charge_of(tmp_path, first_delivery)
    assert first_charge is not None and first_charge.settlement_tx_hash

    # Between runs: the permit's allowance, less the settled charge, and the developer's
    # recipient's balance are in the file.
    chain = kept_chain(tmp_path)
    assert chain.allowance(budget.wallet) == quickstart.BUDGET_ATOMIC - PRICE
    assert chain.usdc_balance(DEMO_PAY_TO) == PRICE

    with dev_server(tmp_path, port) as again:
        again.wait_for(TAKEN_UP)
        # The developer's balance and the payer's test USDC, read from this run's chain.
        assert usdc_balance(again, DEMO_PAY_TO) == PRICE
        assert usdc_balance(again, budget.wallet) == quickstart.BUDGET_ATOMIC - PRICE
        # The same budget pays again (no new permit) and the charge settles: the
        # allowance is on this run's chain, or transferFrom would revert.
        second = pay(again, budget, key="kept-chain:retry:2")
        assert usdc_balance(again, DEMO_PAY_TO) == 2 * PRICE
    assert "not taken up" not in again.output()
    second_charge = charge_of(tmp_path, second)
    assert second_charge is not None and second_charge.settlement_tx_hash
    assert second_charge.owner_wallet == budget.wallet.lower()
    assert kept_chain(tmp_path).allowance(budget.wallet) == (
        quickstart.BUDGET_ATOMIC - 2 * PRICE)
    with service_db(tmp_path) as session:  # reconciliation found the chain as recorded
        assert list(session.scalars(select(ChainFinding))) == []


def test_a_damaged_state_file_starts_a_new_chain_and_leaves_the_ledger(tmp_path: Path) -> None:
    first_run(tmp_path)
    state = tmp_path / "var" / "chain-state"
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a record in the middle: not a block cut short
    state.write_bytes(bytes(data))
    before = ledger_rows(tmp_path)

    with dev_server(tmp_path) as again:
        again.wait_for(re.compile(r"not taken up"))
        after = ledger_rows(tmp_path)
    said = again.output()
    assert f"{state} cannot be read: a record at byte" in said
    assert "1 active budget(s) and 2 mined chain transaction(s)" in said
    assert f"It was moved to {state}.rejected" in said
    assert f"delete {tmp_path / 'var'}" in said
    assert not TAKEN_UP.search(said)
    assert after == before  # what the start wrote is the new chain's name, nothing else
    assert (tmp_path / "var" / "chain-state.rejected").read_bytes() == bytes(data)
    assert read_state(state).header.genesis != ""  # the new chain, kept from now on
