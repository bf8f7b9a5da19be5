"""``svc-ops contract deploy`` (ops/contract.py, payments/chain/deploy.py): the committed
BudgetSpenderV2 onto a node, before any spender is configured; the address it prints then
serves the servers' reads and takes owner transactions."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from eth_account import Account
from sqlalchemy import select

from payments.chain.in_process import DEPLOYER_KEY
from payments.chain.json_rpc import read_only
from payments.runtime.models import OperatorAction, OperatorActionKind
from router.settings import SettingsError, load_settings
from tests.chain.world import recipient
from tests.ops.conftest import Ops
from tests.support.evm_node import EvmNode

OWNER = str(Account.from_key(DEPLOYER_KEY).address)


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
