"""The same flows over JSON-RPC, against a Hardhat node the test starts (npm, Node 20)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from eth_account import Account
from eth_typing import HexStr
from sqlalchemy import func, select, text, update
from web3 import HTTPProvider, Web3
from web3.types import RPCEndpoint

from ops.cli import main as svc_ops
from payments import migrate
from payments.chain.batching import BatchPolicy
from payments.chain.contracts import load_artifact
from payments.chain.gateway import FeeAboveCap
from payments.chain.heartbeat import heartbeats
from payments.chain.json_rpc import JsonRpcChain, read_only
from payments.chain.models import (
    ChainFinding,
    ChainTransaction,
    ChargeRetry,
    FindingKind,
    TxStatus,
)
from payments.chain.reconcile import Reconciler
from payments.chain.relayer import Relayer
from payments.chain.settlement import SettlementWorker
from payments.chain.tx_records import signed_tx
from payments.db import make_engine, make_sessionmaker, transaction, utcnow
from payments.ledger.models import (
    AuthorizationStatus,
    Charge,
    DeliveryStatus,
    RelayStatus,
    SettlementBatch,
    SettlementStatus,
)
from payments.models import AllowlistStatus, App
from payments.runtime.models import OperatorAction
from router.chain import open_chain
from router.chain_params import chain_params
from router.settings import load_settings
from tests.chain.hardhat import OWNER_KEY, RELAYER_KEY, HardhatNode, hardhat_node
from tests.chain.world import Crash, World, crash_at, recipient, wallet
from tests.conftest import fresh_pg_database

S = SettlementStatus
STRANGER_KEY = "0x" + "5e" * 32  # not a relayer, no gas money


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def ledger(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The module's ledger database: every flow here runs on both (the rows a fee
    replacement or a dropped nonce writes under their row locks too)."""
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("rpc") / "svc.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    return fresh_pg_database(request.getfixturevalue("pg_admin_url"),
                             request.getfixturevalue("pg_template"))


@pytest.fixture(scope="module")
def node(ledger: str) -> Iterator[HardhatNode]:
    """A node per ledger: on-chain charge ids are the ledger's sequence numbers, which a
    second ledger would repeat against the same contract."""
    with hardhat_node() as running:
        yield running


@pytest.fixture(scope="module")
def rpc_world(node: HardhatNode, ledger: str) -> Iterator[World]:
    engine = make_engine(ledger)
    chain = JsonRpcChain.connect(node.url, node.params, RELAYER_KEY, confirmations=1,
                                 poll_interval=0.05)
    world = World(make_sessionmaker(engine), chain, owner_key=OWNER_KEY)
    chain.transact_as(OWNER_KEY, chain.spender.functions.setRelayer(chain.relayer, True))
    world.add_app("game", recipient(0))
    world.add_app("other", recipient(1))
    yield world
    engine.dispose()


def test_permits_batches_and_reconciliation_over_json_rpc(rpc_world: World) -> None:
    world = rpc_world
    assert world.chain.readiness_of(world.chain.relayer).status == "ok"
    alice, bob = wallet(0), wallet(1)
    auths = [world.authorize(alice), world.authorize(bob)]
    seqs = [world.charge(alice), world.charge(bob, "other"), world.charge(alice, product="sword")]

    assert world.relayer().run_once() == 2
    assert {world.authorization(a).relay_status for a in auths} == {RelayStatus.RELAYED}
    report = world.worker().run_once()

    assert report.settled == 3 and len(report.batches) == 1
    assert world.statuses() == dict.fromkeys(seqs, S.SETTLED)
    assert world.delivery(seqs[2]).status == DeliveryStatus.DELIVERED
    tx_hash = str(world.charges()[seqs[0]].settlement_tx_hash)
    receipt = world.chain.receipt(tx_hash)
    assert receipt is not None and receipt.confirmations >= 1 and len(receipt.charges) == 3
    assert world.balance(recipient(0)) == 110_000 and world.balance(recipient(1)) == 10_000
    reconciled = Reconciler(world.sessions, world.chain).run()
    assert reconciled.logs == 3 and reconciled.findings == [] and reconciled.repaired == []

    # Revoke: Permit(value=0) waits for the charge queued before it; relayed past its
    # hold all the same, the charge then fails, decoded.
    late = world.charge(alice)
    world.revoke(alice, nonce=1)
    world.relayer().run_once()
    assert world.authorization(auths[0]).revoke_relay_status == RelayStatus.PENDING
    world.late_relayer().run_once()
    assert world.chain.allowance(alice.address) == 0
    world.worker().run_once()
    assert world.statuses()[late] == S.FAILED
    with world.sessions() as session:
        retry = session.get(ChargeRetry, late)
        assert retry is not None
        assert retry.last_error == "PairTransferFailed/ERC20InsufficientAllowance"


@pytest.fixture
def ops_env(rpc_world: World, node: HardhatNode, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Path:
    """``svc-ops`` settings for the Hardhat node; returns the owner key file."""
    engine_url = rpc_world.sessions.kw["bind"].url.render_as_string(hide_password=False)
    for name, value in {"DATABASE_URL": engine_url, "CHAIN_BACKEND": "json_rpc",
                        "CHAIN_RPC_URL": node.url, "CHAIN_ID": str(node.params.chain_id),
                        "SPENDER_ADDRESS": node.params.spender,
                        "USDC_ADDRESS": node.params.token, "USDC_NAME": "Test USDC",
                        "USDC_VERSION": "1", "RELAYER_KEY": RELAYER_KEY,
                        "CHAIN_CONFIRMATIONS": "1"}.items():
        monkeypatch.setenv(f"SVCSRV_{name}", value)
    monkeypatch.setenv("USER", "opsuser")
    key_file = tmp_path / "owner.key"
    key_file.write_text(OWNER_KEY.hex())
    return key_file


def allowlist_actions(world: World) -> list[tuple[str, str, str, list[str], str]]:
    with world.sessions() as session:
        rows = session.scalars(select(OperatorAction).order_by(OperatorAction.id)).all()
        return [(r.operator, r.action.value, r.subject, r.detail["apps"], r.detail["txHash"])
                for r in rows if r.action.value.startswith("allowlist_")]


def app_id(world: World, slug: str) -> str:
    with world.sessions() as session:
        return session.scalars(select(App.id).where(App.slug == slug)).one()


def test_allowlist_commands_and_decoded_reverts(rpc_world: World, ops_env: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    world, key_file = rpc_world, ops_env
    before = allowlist_actions(world)
    carol = wallet(2)
    world.authorize(carol)
    world.relayer().run_once()
    refused = world.charge(carol, "other")

    assert svc_ops(["allowlist", "remove", recipient(1), "--owner-key-file", str(key_file),
                    "--operator", "dana"]) == 0
    assert "recorded for dana" in capsys.readouterr().out
    with world.sessions() as session:
        status = session.scalars(select(App.recipient_allowlist_status)
                                 .where(App.slug == "other")).one()
    assert status == AllowlistStatus.NOT_ALLOWED
    world.worker().run_once()
    assert world.statuses()[refused] == S.FAILED
    with world.sessions() as session:
        retry = session.get(ChargeRetry, refused)
        assert retry is not None and retry.last_error == "RecipientNotAllowed"  # decoded

    assert svc_ops(["allowlist", "add", recipient(1), "--owner-key-file", str(key_file)]) == 0
    assert svc_ops(["chain", "reconcile"]) == 0
    assert svc_ops(["chain", "budget-drift"]) == 0
    with world.sessions() as session:
        status = session.scalars(select(App.recipient_allowlist_status)
                                 .where(App.slug == "other")).one()
    assert status == AllowlistStatus.ALLOWED

    # Each owner transaction is recorded: who (--operator, else $USER), what, the address,
    # the apps paid there, and the mined transaction.
    recorded = allowlist_actions(world)[len(before):]
    other = [app_id(world, "other")]
    assert [r[:4] for r in recorded] == [("dana", "allowlist_remove", recipient(1), other),
                                         ("opsuser", "allowlist_add", recipient(1), other)]
    for *_, tx_hash in recorded:
        receipt = world.chain.receipt(tx_hash)
        assert receipt is not None and receipt.status == 1


@pytest.mark.parametrize("name", ["   ", "x" * 121])
def test_allowlist_refuses_a_bad_operator_before_sending(
        rpc_world: World, node: HardhatNode, ops_env: Path,
        capsys: pytest.CaptureFixture[str], name: str) -> None:
    world, key_file = rpc_world, ops_env
    assert world.chain.allowed_recipient(recipient(0))
    before = allowlist_actions(world)
    eth = Web3(HTTPProvider(node.url)).eth
    owner = Account.from_key(OWNER_KEY).address
    nonce = eth.get_transaction_count(owner)

    code = svc_ops(["allowlist", "remove", recipient(0), "--owner-key-file", str(key_file),
                    "--operator", name])

    assert code == 2 and "--operator" in capsys.readouterr().err
    assert eth.get_transaction_count(owner) == nonce  # nothing sent
    assert world.chain.allowed_recipient(recipient(0))
    assert allowlist_actions(world) == before


def test_a_nonce_held_in_the_pool_by_a_twin_worker_drops_the_batch_at_once(
        rpc_world: World, node: HardhatNode) -> None:
    """Two workers on one key against a real node whose pool holds one's transaction (mining
    paused): the other signs the same nonce, the node answers "replacement transaction
    underpriced", and its batch is dropped and queued again at once, not taken for sent
    (which held its charges until the pool's transaction was mined: the deploy fault test's
    two-workers stage waited on that)."""
    world = rpc_world
    policy = BatchPolicy(max_age=timedelta(0), unsent_grace=timedelta(hours=1),
                         receipt_timeout=0.5)
    twin = JsonRpcChain.connect(node.url, node.params, RELAYER_KEY, confirmations=1,
                                poll_interval=0.05)
    worker_b = SettlementWorker(world.sessions, twin, policy=policy)
    users = [wallet(20), wallet(21)]
    for user in users:
        world.authorize(user)
    world.relayer().run_once()
    eth = Web3(HTTPProvider(node.url)).eth

    def automine(on: bool) -> None:
        node_call(node, "evm_setAutomine", on)
        if on:
            node_call(node, "evm_mine")

    seqs = [world.charge(users[0])]
    assert worker_b.run_once(max_batches=1).settled == 1  # B remembers k + 1
    pooled: list[str] = []
    try:
        automine(False)
        seqs.append(world.charge(users[1]))
        worker_a = SettlementWorker(world.sessions, world.chain, policy=policy)  # asks the node
        held = worker_a.run_once(max_batches=1).batches  # A: k + 1, waiting in the pool
        seqs.append(world.charge(users[0]))
        report = worker_b.run_once(max_batches=1)  # B: k + 1 again

        with world.sessions() as session:
            batch = session.get(SettlementBatch, report.batches[0])
            assert batch is not None and batch.status == SettlementStatus.FAILED
            dropped = session.scalars(select(ChainTransaction).where(
                ChainTransaction.batch_id == report.batches[0])).one()
        assert dropped.status == TxStatus.DROPPED and dropped.nonce is not None
        relayer = Account.from_key(RELAYER_KEY).address
        assert world.statuses()[seqs[2]] == S.QUEUED
        assert eth.get_transaction_count(relayer, "pending") == dropped.nonce + 1

        again = worker_b.run_once(max_batches=1).batches  # asks the node: k + 2, pooled
        assert eth.get_transaction_count(relayer, "pending") == dropped.nonce + 2
        pooled = held + again
        assert {world.statuses()[seq] for seq in seqs[1:]} == {S.SETTLING}
    finally:
        automine(True)
    for worker in (worker_a, worker_b):
        worker.run_once()
    assert {seq: world.statuses()[seq] for seq in seqs} == dict.fromkeys(seqs, S.SETTLED)
    with world.sessions() as session:
        settled_by = {seq: session.scalar(select(Charge.batch_id).where(Charge.seq == seq))
                      for seq in seqs[1:]}
    assert set(settled_by.values()) == set(pooled)
    logs = world.chain.charge_settled_logs(0, world.chain.block_number())
    on_chain = Counter(int.from_bytes(lg.charge_id, "big") for lg in logs)
    assert {seq: on_chain[seq] for seq in seqs} == dict.fromkeys(seqs, 1)


def node_call(node: HardhatNode, method: str, *params: object) -> object:
    return Web3(HTTPProvider(node.url)).provider.make_request(RPCEndpoint(method), list(params))


def batch_txs(world: World, batch_id: str) -> list[ChainTransaction]:
    with world.sessions() as session:
        return list(session.scalars(select(ChainTransaction).where(
            ChainTransaction.batch_id == batch_id).order_by(ChainTransaction.id)))


def relay_txs(world: World, authorization_id: str) -> list[ChainTransaction]:
    with world.sessions() as session:
        return list(session.scalars(select(ChainTransaction).where(
            ChainTransaction.authorization_id == authorization_id)
            .order_by(ChainTransaction.id)))


def test_a_batch_priced_out_by_a_rising_base_fee_is_sent_again_with_higher_fees(
        rpc_world: World, node: HardhatNode) -> None:
    """Its transaction offers a fee cap the chain's base fee has passed: no block takes it,
    and sent again byte for byte it never would be. After ``replace_after`` the worker signs
    the same call under the same nonce with the fees the chain asks now, records it before
    sending it, and settles the batch with whichever of the two is mined: once."""
    world = rpc_world
    policy = BatchPolicy(max_age=timedelta(0), unsent_grace=timedelta(hours=1),
                         receipt_timeout=0.5, replace_after=timedelta(0))
    user = wallet(22)
    world.authorize(user)
    world.relayer().run_once()
    eth = Web3(HTTPProvider(node.url)).eth
    worker = SettlementWorker(world.sessions, world.chain, policy=policy)
    seqs = [world.charge(user), world.charge(user)]
    try:
        node_call(node, "evm_setAutomine", False)
        (batch_id,) = worker.run_once(max_batches=1).batches  # in the pool, unmined
        (first,) = batch_txs(world, batch_id)
        assert first.tx_hash is not None
        sent = eth.get_transaction(HexStr(first.tx_hash))
        offered = int(sent["maxFeePerGas"])
        node_call(node, "hardhat_setNextBlockBaseFeePerGas", hex(offered * 4))
        node_call(node, "evm_mine")  # a block without it: its fee cap is below the base fee
        assert eth.get_transaction(HexStr(first.tx_hash))["blockNumber"] is None

        worker.run_once(max_batches=1)

        old, new = batch_txs(world, batch_id)
        assert (old.id, old.status, new.status) == (first.id, TxStatus.PENDING,
                                                     TxStatus.PENDING)
        assert new.nonce == first.nonce and new.tx_hash is not None
        pooled = eth.get_transaction(HexStr(new.tx_hash))
        assert int(pooled["maxFeePerGas"]) > offered * 8  # twice the new base fee, and more
        assert (pooled["input"], pooled["gas"]) == (sent["input"], sent["gas"])  # the same call
        assert world.statuses()[seqs[0]] == S.SETTLING
    finally:
        node_call(node, "evm_setAutomine", True)
        node_call(node, "evm_mine")
    worker.run_once()

    old, new = batch_txs(world, batch_id)
    assert (old.status, new.status) == (TxStatus.DROPPED, TxStatus.CONFIRMED)
    with world.sessions() as session:
        batch = session.get(SettlementBatch, batch_id)
        assert batch is not None and batch.status == S.SETTLED
        assert batch.tx_hash == new.tx_hash
    assert {seq: world.statuses()[seq] for seq in seqs} == dict.fromkeys(seqs, S.SETTLED)
    assert {world.charges()[seq].settlement_tx_hash for seq in seqs} == {new.tx_hash}
    logs = world.chain.charge_settled_logs(0, world.chain.block_number())
    on_chain = Counter(int.from_bytes(lg.charge_id, "big") for lg in logs)
    assert {seq: on_chain[seq] for seq in seqs} == dict.fromkeys(seqs, 1)


def test_a_permit_relay_priced_out_is_sent_again_with_higher_fees(
        rpc_world: World, node: HardhatNode) -> None:
    """The relayer the same way: a stuck relay holds every later nonce of the key."""
    world = rpc_world
    user = wallet(23)
    authorization_id = world.authorize(user)
    relayer = Relayer(world.sessions, world.chain, receipt_timeout=0.5,
                      replace_after=timedelta(0))
    eth = Web3(HTTPProvider(node.url)).eth
    try:
        node_call(node, "evm_setAutomine", False)
        assert relayer.run_once() == 0  # sent, in the pool
        (first,) = relay_txs(world, authorization_id)
        assert first.tx_hash is not None
        offered = int(eth.get_transaction(HexStr(first.tx_hash))["maxFeePerGas"])
        node_call(node, "hardhat_setNextBlockBaseFeePerGas", hex(offered * 4))
        node_call(node, "evm_mine")

        assert relayer.run_once() == 0

        old, new = relay_txs(world, authorization_id)
        assert (old.status, new.status, new.nonce) == (TxStatus.PENDING, TxStatus.PENDING,
                                                       first.nonce)
        assert world.authorization(authorization_id).relay_tx_hash == new.tx_hash
    finally:
        node_call(node, "evm_setAutomine", True)
        node_call(node, "evm_mine")
    assert relayer.run_once() == 1

    old, new = relay_txs(world, authorization_id)
    assert (old.status, new.status) == (TxStatus.DROPPED, TxStatus.CONFIRMED)
    budget = world.authorization(authorization_id)
    assert (budget.relay_status, budget.relay_tx_hash) == (RelayStatus.RELAYED, new.tx_hash)
    assert world.chain.allowance(user.address) == 1_000_000


GWEI = 10**9


def latest_base_fee(node: HardhatNode, wei: int) -> None:
    """Mine a block whose base fee is ``wei``: the one fees are read from."""
    node_call(node, "hardhat_setNextBlockBaseFeePerGas", hex(wei))
    node_call(node, "evm_mine")


def capped_chain(node: HardhatNode, cap: int) -> JsonRpcChain:
    return JsonRpcChain.connect(node.url, node.params, RELAYER_KEY, confirmations=1,
                                poll_interval=0.05, max_fee_per_gas=cap)


def test_fees_above_the_operator_cap_sign_nothing_until_they_fall(
        rpc_world: World, node: HardhatNode, ops_env: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """SVCSRV_CHAIN_MAX_FEE_PER_GAS: while the base fee is above it, no batch is claimed and
    no relay signed (no nonce taken, nothing pooled, no failed batch per cycle); readiness
    says why; once it falls the charges settle offering at most the cap."""
    world = rpc_world
    monkeypatch.setenv("SVCSRV_CHAIN_MAX_FEE_PER_GAS", str(5 * GWEI))
    chain = open_chain(load_settings(), node.params, world.sessions).gateway  # as a server
    assert isinstance(chain, JsonRpcChain)
    eth = Web3(HTTPProvider(node.url)).eth
    user, later = wallet(24), wallet(25)
    world.authorize(user)
    world.relayer().run_once()
    seqs = [world.charge(user), world.charge(user)]
    pending_budget = world.authorize(later)
    latest_base_fee(node, 8 * GWEI)
    nonce = eth.get_transaction_count(Web3.to_checksum_address(chain.relayer), "pending")

    def batches() -> int:
        with world.sessions() as session:
            return int(session.scalar(select(func.count()).select_from(SettlementBatch)) or 0)
    before = batches()
    worker = SettlementWorker(world.sessions, chain, policy=BatchPolicy(max_age=timedelta(0)))
    relayer = Relayer(world.sessions, chain, receipt_timeout=5.0)
    for _ in range(2):  # cycle after cycle
        with pytest.raises(FeeAboveCap, match="above the cap"):
            worker.run_once()
        with pytest.raises(FeeAboveCap):
            relayer.run_once()

    assert {seq: world.statuses()[seq] for seq in seqs} == dict.fromkeys(seqs, S.QUEUED)
    assert batches() == before
    assert world.authorization(pending_budget).relay_status == RelayStatus.PENDING
    assert eth.get_transaction_count(Web3.to_checksum_address(chain.relayer), "pending") == nonce
    capsys.readouterr()
    # The operator's view, from the same settings: the node answers, a check fails (exit 3).
    assert svc_ops(["chain", "status"]) == 3
    readiness = json.loads(capsys.readouterr().out)
    assert readiness["status"] == "down"
    assert (readiness["baseFeePerGasWei"], readiness["maxFeePerGasWei"]) == (
        str(8 * GWEI), str(5 * GWEI))
    assert any("fee cap" in problem for problem in readiness["problems"])

    latest_base_fee(node, 4 * GWEI)  # under the cap; twice it plus the tip is not
    (batch_id,) = worker.run_once().batches
    assert relayer.run_once() == 1

    assert {seq: world.statuses()[seq] for seq in seqs} == dict.fromkeys(seqs, S.SETTLED)
    (sent,) = batch_txs(world, batch_id)
    assert sent.tx_hash is not None
    assert int(eth.get_transaction(HexStr(sent.tx_hash))["maxFeePerGas"]) == 5 * GWEI
    assert world.authorization(pending_budget).relay_status == RelayStatus.RELAYED
    assert chain.readiness_of(chain.relayer).status == "ok"


def test_an_owner_transaction_above_the_cap_is_sent_with_the_operators_own_cap(
        rpc_world: World, node: HardhatNode, ops_env: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The relayer's cap bounds ``svc-ops allowlist`` too; an operator at the keyboard is
    told so, nothing is sent, and ``--max-fee-per-gas`` gives that one transaction its own
    cap (removing a recipient may not wait for the fees to fall)."""
    monkeypatch.setenv("SVCSRV_CHAIN_MAX_FEE_PER_GAS", str(5 * GWEI))
    spender = Web3(HTTPProvider(node.url)).eth.contract(
        address=Web3.to_checksum_address(node.params.spender),
        abi=load_artifact("BudgetSpenderV2").abi)
    address = recipient(7)
    latest_base_fee(node, 8 * GWEI)
    capsys.readouterr()
    add = ["allowlist", "add", address, "--owner-key-file", str(ops_env)]

    assert svc_ops(add) == 2
    assert "--max-fee-per-gas" in capsys.readouterr().err
    assert not spender.functions.allowedRecipients(address).call()
    with pytest.raises(SystemExit):  # argparse: not a cap
        svc_ops([*add, "--max-fee-per-gas", "0"])

    assert svc_ops([*add, "--max-fee-per-gas", str(20 * GWEI)]) == 0
    assert spender.functions.allowedRecipients(address).call()
    tx_hash = capsys.readouterr().out.split(" tx ")[1].split()[0]
    sent = Web3(HTTPProvider(node.url)).eth.get_transaction(HexStr(tx_hash))
    assert 8 * GWEI < int(sent["maxFeePerGas"]) <= 20 * GWEI
    latest_base_fee(node, 1 * GWEI)


def test_a_pooled_batch_is_not_replaced_past_the_operator_cap(
        rpc_world: World, node: HardhatNode) -> None:
    """Priced out, a pooled batch is signed again only with fees under the cap: not when the
    bump a node requires (an eighth) would pass it, nor while the base fee is above it. It
    waits with the fees it has, and is mined once the base fee falls."""
    world = rpc_world
    cap = 5 * GWEI
    chain = capped_chain(node, cap)
    eth = Web3(HTTPProvider(node.url)).eth
    user = wallet(26)
    world.authorize(user)
    world.relayer().run_once()
    policy = BatchPolicy(max_age=timedelta(0), unsent_grace=timedelta(hours=1),
                         receipt_timeout=0.5, replace_after=timedelta(0))
    worker = SettlementWorker(world.sessions, chain, policy=policy)
    seqs = [world.charge(user), world.charge(user)]
    latest_base_fee(node, 1_800_000_000)
    try:
        node_call(node, "evm_setAutomine", False)
        (batch_id,) = worker.run_once(max_batches=1).batches
        (first,) = batch_txs(world, batch_id)
        assert first.tx_hash is not None
        offered = int(eth.get_transaction(HexStr(first.tx_hash))["maxFeePerGas"])
        assert offered < cap < offered * 9 // 8 + 1  # a replacement would have to pass it
        latest_base_fee(node, (offered + cap) // 2)  # a block without it, under the cap
        worker.run_once(max_batches=1)
        latest_base_fee(node, 20 * GWEI)
        with pytest.raises(FeeAboveCap):  # after resolving: no replacement, no new batch
            worker.run_once(max_batches=1)

        (still,) = batch_txs(world, batch_id)
        assert (still.tx_hash, still.status) == (first.tx_hash, TxStatus.PENDING)
        assert eth.get_transaction(HexStr(first.tx_hash))["blockNumber"] is None
        latest_base_fee(node, GWEI)  # this block takes it
    finally:
        node_call(node, "evm_setAutomine", True)
    worker.run_once()

    (mined,) = batch_txs(world, batch_id)
    assert (mined.tx_hash, mined.status) == (first.tx_hash, TxStatus.CONFIRMED)
    assert {seq: world.statuses()[seq] for seq in seqs} == dict.fromkeys(seqs, S.SETTLED)


def test_a_dropped_relay_mined_after_all_leaves_the_budget_relayed(
        rpc_world: World, node: HardhatNode) -> None:
    """A node said the permit's nonce was taken and did not know the transaction: the
    relayer dropped it and signed the permit again under the next nonce. Another node behind
    the same URL had it, and mined it first, so the second transaction reverts (the permit's
    token nonce is spent). The permit is on chain: the budget stays relayed and active, its
    charge settles; before, that revert failed the budget and its charges for good."""
    world = rpc_world
    user = wallet(27)
    auth = world.authorize(user)
    seq = world.charge(user)
    try:
        node_call(node, "evm_setAutomine", False)
        with pytest.raises(Crash):
            world.relayer(crash_at("recorded")).run_once()
        (first,) = relay_txs(world, auth)
        world.chain.broadcast(signed_tx(first))  # pooled at one node...
        with transaction(world.sessions) as session:  # ...refused at another: dropped
            session.execute(update(ChainTransaction).where(ChainTransaction.id == first.id)
                            .values(status=TxStatus.DROPPED))
        Relayer(world.sessions, world.chain, receipt_timeout=0.2).run_once()  # signed again
        _, second = relay_txs(world, auth)
        assert (second.status, second.nonce) == (TxStatus.PENDING, (first.nonce or 0) + 1)
    finally:
        node_call(node, "evm_setAutomine", True)
        node_call(node, "evm_mine")  # the first is mined, and the second reverts

    world.relayer().run_once()

    assert [tx.status for tx in relay_txs(world, auth)] == [TxStatus.CONFIRMED, TxStatus.REVERTED]
    budget = world.authorization(auth)
    assert (budget.relay_status, budget.status) == (RelayStatus.RELAYED,
                                                    AuthorizationStatus.ACTIVE)
    assert world.chain.allowance(user.address) == 1_000_000
    world.worker().run_once()
    assert world.statuses()[seq] == S.SETTLED


def test_svc_ops_signs_for_the_network_the_servers_name(ops_env: Path, node: HardhatNode) -> None:
    """``svc-ops chain run`` writes the settlement's events: they carry the ``network`` the
    servers put on the delivery's (a local node is ``eip155:<chain id>``, never Base Sepolia)."""
    from ops.chain import connect
    settings = load_settings()
    params = connect(settings).params
    assert params == chain_params(settings)
    assert params.network == f"eip155:{node.params.chain_id}"


def test_findings_are_listed_without_the_relayer_key_or_a_node(
        rpc_world: World, ops_env: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``svc-ops chain findings`` reads the ledger's rows: a monitoring host runs it without
    the relayer's private key (one sending process per key) and without reaching the node."""
    with rpc_world.sessions() as session, session.begin():
        session.add(ChainFinding(kind=FindingKind.UNKNOWN_CHARGE, fingerprint="walk:987654",
                                 charge_seq=987654,
                                 tx_hash="0x" + "ab" * 32, detail={"note": "walk"}))
    monkeypatch.delenv("SVCSRV_RELAYER_KEY")
    monkeypatch.setenv("SVCSRV_CHAIN_RPC_URL", "http://127.0.0.1:9")  # nothing listens
    assert svc_ops(["chain", "findings"]) == 0
    out = capsys.readouterr().out
    assert "unknown_charge\tcharge=987654" in out


def test_the_reads_alone_name_no_relayer(node: HardhatNode) -> None:
    """A server without chain workers holds no key and checks the chain's reads only
    (router/health.py names no relayer); the relayer's checks are for an address that
    signs, here one that is not a relayer and has no gas money."""
    reads = read_only(node.url, node.params, confirmations=1)
    stranger = Account.from_key(STRANGER_KEY).address
    signing = reads.readiness_of(stranger, named="the relayer key")
    assert signing.status == "down"
    assert signing.detail["problems"] == ["the relayer key is not a relayer of the spender",
                                          "the relayer key has no gas money"]
    alone = reads.readiness_of()
    assert alone.status == "ok", alone.detail
    assert "relayer" not in alone.detail and "relayerBalanceWei" not in alone.detail
    assert alone.detail["chainId"] == node.params.chain_id
    wrong = read_only(node.url, replace(node.params, spender=recipient(2)), confirmations=1)
    assert wrong.readiness_of().detail["problems"] == ["no contract at the spender address"]


def test_svc_ops_chain_run_says_who_it_relays_for_and_beats(
        rpc_world: World, ops_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert svc_ops(["chain", "run", "--once"]) == 0
    out = capsys.readouterr().out
    address = Account.from_key(RELAYER_KEY).address
    assert f"chain worker running for relayer {address}" in out
    assert RELAYER_KEY[2:].lower() not in out.lower()
    with rpc_world.sessions() as session:
        beats = {b.relayer: b for b in heartbeats(session)}
    assert beats[address].age(utcnow()) < 60


def test_svc_ops_chain_run_on_a_newer_schema(
        rpc_world: World, ops_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The old worker during a rolling upgrade (migrate done, not yet restarted)."""
    engine = rpc_world.sessions.kw["bind"]
    head = migrate.head_revision(engine)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0999_newer'"))
    try:
        assert svc_ops(["chain", "run", "--once"]) == 0
        assert "0999_newer" in capsys.readouterr().err
    finally:
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": head})


def test_sigterm_stops_svc_ops_chain_run_after_its_cycle(ops_env: Path) -> None:
    """As a process: the start line, then SIGTERM (compose's stop) exits 0 with a last line,
    not -15 in silence."""
    # `-m` from the checkout: the `svc-ops` script imports whichever tree is installed.
    worker = subprocess.Popen([sys.executable, "-m", "ops.cli", "chain", "run"],
                              cwd=Path(__file__).resolve().parents[2], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        assert worker.stdout is not None
        first = worker.stdout.readline()
        assert "chain worker running for relayer" in first, first
        time.sleep(1.5)  # a cycle or two
        worker.send_signal(signal.SIGTERM)
        out, _ = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    assert worker.returncode == 0, out
    assert "SIGTERM: finishing this cycle, then stopping" in out
    assert "chain worker stopped after" in out


def test_deploy_relayers_and_status_over_a_node(
        rpc_world: World, node: HardhatNode, ops_env: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The operator's chain tooling on a real node (tests/ops runs it on the in-process EVM):
    a deploy without a spender configured, a relayer added to the new contract, and
    `chain status` on a host with no relayer key."""
    monkeypatch.delenv("SVCSRV_SPENDER_ADDRESS")
    capsys.readouterr()
    assert svc_ops(["contract", "deploy", "--owner-key-file", str(ops_env)]) == 0
    out = capsys.readouterr().out
    spender = out.split("SVCSRV_SPENDER_ADDRESS=")[1].split()[0]
    monkeypatch.setenv("SVCSRV_SPENDER_ADDRESS", spender)
    monkeypatch.delenv("SVCSRV_RELAYER_KEY")
    address = Account.from_key(RELAYER_KEY).address

    assert svc_ops(["relayer", "add", address, "--owner-key-file", str(ops_env)]) == 0
    capsys.readouterr()
    assert svc_ops(["chain", "status", "--relayer", address]) == 0
    status = json.loads(capsys.readouterr().out)
    assert (status["status"], status["spender"], status["relayer"]) == ("ok", spender, address)
    assert status["relayerKey"] == "not_configured"
    assert svc_ops(["relayer", "remove", address, "--owner-key-file", str(ops_env)]) == 0
    assert svc_ops(["relayer", "status", address]) == 3  # it cannot send any more
    assert capsys.readouterr().out.splitlines()[-1].split("\t")[1] == "not a relayer"
    chain = rpc_world.chain  # the servers' contract is untouched
    assert chain.readiness_of(chain.relayer).status == "ok"
