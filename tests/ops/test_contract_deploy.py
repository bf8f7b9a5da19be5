"""``svc-ops contract deploy`` (ops/contract.py, payments/chain/deploy.py): the committed
BudgetSpenderV2 onto a node, before any spender is configured; the address it prints then
serves the servers' reads and takes owner transactions. The dev chain and the local
topology deploy through the same module (so do the contract's own tests,
tests/chain/chain_env.py, and the gas benchmark, bench/gas_bench.py), and every contract
they make passes its one check once mined."""

from __future__ import annotations

import importlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account
from sqlalchemy import select
from web3 import Web3

from ops.cluster.services import HARDHAT_OWNER_KEY, HARDHAT_RELAYER_KEY, deploy_contracts
from payments.chain import deploy
from payments.chain.gateway import ChainError
from payments.chain.in_process import DEPLOYER_KEY, InProcessChain
from payments.chain.json_rpc import read_only
from payments.chain.params import create_address
from payments.runtime.models import OperatorAction, OperatorActionKind
from router.settings import SettingsError, load_settings
from tests.chain.chain_env import deploy_chain
from tests.chain.world import recipient
from tests.ops.conftest import Ops
from tests.support.evm_node import EvmNode

OWNER = str(Account.from_key(DEPLOYER_KEY).address)
HARDHAT_OWNER = str(Account.from_key(HARDHAT_OWNER_KEY).address)
BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_a_deployed_spender_serves_reads_and_takes_owner_transactions(
        ops: Ops, evm: EvmNode) -> None:
    code, out, err = ops.owner("contract", "deploy", "--operator", "dana",
                               SPENDER_ADDRESS=None)

    assert code == 0, err
    setting = [line for line in out.splitlines() if line.startswith("SVCSRV_SPENDER_ADDRESS=")]
    assert len(setting) == 1
    address = setting[0].removeprefix("SVCSRV_SPENDER_ADDRESS=")
    assert address != evm.params.spender  # a new contract, not the dev chain's own
    assert f"BudgetSpenderV2 deployed at {address}: tx 0x" in out
    assert f"token {evm.params.token}, owner {OWNER}; recorded for dana" in out

    reads = read_only(evm.url, replace(evm.params, spender=address), confirmations=1)
    assert reads.readiness_of().status == "ok"
    assert reads.owner() == OWNER
    status = json.loads(ops("chain", "status", SPENDER_ADDRESS=address)[1])
    assert (status["status"], status["spender"]) == ("ok", address)
    assert ops.owner("relayer", "add", recipient(3), SPENDER_ADDRESS=address)[0] == 0
    assert reads.is_relayer(recipient(3)) and not evm.chain.is_relayer(recipient(3))

    with ops.sessions()() as session:
        row = session.scalars(select(OperatorAction).where(
            OperatorAction.action == OperatorActionKind.CONTRACT_DEPLOYED)).one()
    assert (row.operator, row.subject) == ("dana", address)
    assert row.detail["owner"] == OWNER and row.detail["chainId"] == evm.params.chain_id
    receipt = evm.chain.receipt(row.detail["txHash"])
    assert receipt is not None and receipt.succeeded


@pytest.mark.parametrize(("env", "said"), [
    ({"CHAIN_ID": "84532"}, "the node is on chain 131277322940537, and SVCSRV_CHAIN_ID says "
                            "84532: nothing was sent"),
    ({"USDC_ADDRESS": recipient(1)}, f"no contract at the token address {recipient(1)} "
                                     "(SVCSRV_USDC_ADDRESS) on chain 131277322940537: "
                                     "nothing was sent"),
])
def test_a_deploy_the_settings_do_not_match_is_refused_before_sending(
        ops: Ops, evm: EvmNode, env: dict[str, str], said: str) -> None:
    sent = evm.chain.mined_nonce(OWNER)
    code, out, err = ops.owner("contract", "deploy", SPENDER_ADDRESS=None, **env)
    assert (code, out, err) == (1, "", f"svc-ops: chain: {said}\n")
    assert evm.chain.mined_nonce(OWNER) == sent


def test_an_owner_without_gas_money_is_told_so(ops: Ops, evm: EvmNode) -> None:
    ops.owner_key_file.write_text("0x" + "42" * 32)
    code, _, err = ops.owner("contract", "deploy", SPENDER_ADDRESS=None)
    address = Account.from_key("0x" + "42" * 32).address
    assert (code, err) == (1, f"svc-ops: chain: {address} (the owner key's account) holds no "
                              "gas money: nothing was sent\n")


def test_the_in_process_chain_deploys_its_own(ops: Ops) -> None:
    code, _, err = ops.owner("contract", "deploy", CHAIN_BACKEND=None, CHAIN_RPC_URL=None,
                             SPENDER_ADDRESS=None)
    assert code == 2 and "deploys its contracts" in err


def test_only_the_servers_and_the_chain_commands_need_a_spender(ops: Ops) -> None:
    """A deploy comes before the address it makes: svc-ops loads settings without one (and
    its other chain commands ask for it); a server still refuses to start without one."""
    env = {"SVCSRV_CHAIN_BACKEND": "json_rpc", "SVCSRV_CHAIN_RPC_URL": "http://127.0.0.1:9"}
    assert load_settings(env, role="operator").spender_address is None
    with pytest.raises(SettingsError, match="needs SVCSRV_SPENDER_ADDRESS"):
        load_settings(env)
    code, _, err = ops("chain", "status", SPENDER_ADDRESS=None)
    assert code == 2 and "set SVCSRV_SPENDER_ADDRESS" in err and "contract deploy" in err


def passed_checks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """From now on, each contract that passes ``deploy.check_deployed``: (name, address)."""
    passed: list[tuple[str, str]] = []
    check = deploy.check_deployed

    def spy(w3: Web3, name: str, address: str, **expected: Any) -> None:
        check(w3, name, address, **expected)
        passed.append((name, address))
    monkeypatch.setattr(deploy, "check_deployed", spy)
    return passed


def test_the_dev_chain_the_topology_and_svc_ops_deploy_through_one_check(
        ops: Ops, evm: EvmNode, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each contract any of the three deployers makes passes the one check once mined, and
    is the contract its caller then uses, with its relayer made by the owner."""
    passed = passed_checks(monkeypatch)
    dev = InProcessChain.start()
    assert passed == [("TestUSDC", dev.params.token), ("BudgetSpenderV2", dev.params.spender)]
    assert dev.is_relayer(dev.relayer)

    # The topology's deploy onto a node: the in-process EVM behind JSON-RPC stands in for
    # Hardhat, with Hardhat's account 0 given gas money, so the addresses are Hardhat's.
    evm.chain.fund_gas(HARDHAT_OWNER)
    topology = deploy_contracts(evm.url)
    assert passed[2:] == [("TestUSDC", topology.token), ("BudgetSpenderV2", topology.spender)]
    assert (topology.token, topology.spender) == (create_address(HARDHAT_OWNER, 0),
                                                  create_address(HARDHAT_OWNER, 1))
    on_node = read_only(evm.url, topology, confirmations=1)
    assert on_node.owner() == HARDHAT_OWNER
    assert on_node.is_relayer(Account.from_key(HARDHAT_RELAYER_KEY).address)

    code, out, err = ops.owner("contract", "deploy", SPENDER_ADDRESS=None)
    assert code == 0, err
    assert passed[4:] == [("BudgetSpenderV2", out.split("SPENDER_ADDRESS=")[1].split()[0])]


def test_the_chain_tests_deploy_through_the_one_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/chain's contracts (the ``env`` fixture) are made by the same path, so the
    contract's own tests run on what the dev chain and an operator deploy."""
    passed = passed_checks(monkeypatch)
    env = deploy_chain()
    assert passed == [("TestUSDC", env.usdc.address), ("BudgetSpenderV2", env.spender.address)]
    assert env.spender.functions.owner().call() == env.owner == OWNER
    assert env.spender.functions.relayers(env.relayer).call()


def test_the_gas_bench_deploys_through_the_one_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/gas_bench.py measures the contracts every deployer makes (its figures are
    tests/bench/test_benches_run.py's)."""
    passed = passed_checks(monkeypatch)
    monkeypatch.syspath_prepend(str(BENCH))  # the benches import each other as top-level
    bench = importlib.import_module("gas_bench").Bench()
    assert passed == [("TestUSDC", bench.usdc.address), ("BudgetSpenderV2", bench.spender.address)]
    assert bench.spender.functions.owner().call() == bench.admin == OWNER
    assert bench.spender.functions.relayers(bench.relayer).call()


def test_a_deploy_failing_its_check_stops_every_deployer(
        ops: Ops, evm: EvmNode, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(w3: Web3, name: str, address: str, **expected: Any) -> None:
        raise ChainError(f"the {name} at {address} is not the one deployed: its owner is ...")
    monkeypatch.setattr(deploy, "check_deployed", refuse)

    with pytest.raises(ChainError, match=r"TestUSDC at 0x\w+ is not the one deployed"):
        InProcessChain.start()
    evm.chain.fund_gas(HARDHAT_OWNER)
    with pytest.raises(ChainError, match=r"TestUSDC at 0x\w+ is not the one deployed"):
        deploy_contracts(evm.url)
    code, out, err = ops.owner("contract", "deploy", SPENDER_ADDRESS=None)
    assert (code, out) == (1, "")
    assert "BudgetSpenderV2 at 0x" in err and "is not the one deployed" in err
    assert "(tx 0x" in err  # so the operator can look it up


def test_the_check_names_what_differs(evm: EvmNode) -> None:
    w3, params = evm.chain.w3, evm.params
    deploy.check_deployed(w3, "BudgetSpenderV2", params.spender, owner=OWNER,
                          token=params.token)
    deploy.check_deployed(w3, "TestUSDC", params.token, owner=OWNER, token=None)
    differs = [
        ({"address": recipient(1)}, "it has no code"),
        ({"owner": HARDHAT_OWNER}, f"its owner is {OWNER}, not {HARDHAT_OWNER}"),
        ({"token": recipient(2)}, f"its token is {params.token}, not {recipient(2)}"),
    ]
    for change, said in differs:
        given = {"address": params.spender, "owner": OWNER, "token": params.token, **change}
        with pytest.raises(ChainError) as refused:
            deploy.check_deployed(w3, "BudgetSpenderV2", **given)
        assert str(refused.value) == (f"the BudgetSpenderV2 at {given['address']} is not the "
                                      f"one deployed: {said}")
