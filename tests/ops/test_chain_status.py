"""``svc-ops chain status`` from a host with no relayer key, and a server's ``/statusz`` with
none: the node's state and the missing key are told apart, and the two agree. The status
commands' exit codes (ops/exits.py) say what the JSON says, for monitors."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from eth_account import Account

from payments.chain.in_process import RELAYER_KEY
from tests.chain.world import recipient
from tests.ops.conftest import Ops
from tests.support.evm_node import EvmNode
from tests.support.router import RouterFactory

RELAYER = str(Account.from_key(RELAYER_KEY).address)
READS = ("chainId", "spender", "token", "simulated")


def status(ops: Ops, *args: str, exit: int = 0, **env: str | None) -> dict[str, Any]:
    code, out, err = ops("chain", "status", *args, **env)
    assert code == exit, err
    found: dict[str, Any] = json.loads(out)
    return found


def test_chain_status_needs_no_relayer_key(ops: Ops, evm: EvmNode) -> None:
    reads = status(ops)
    assert (reads["status"], reads["relayerKey"]) == ("ok", "not_configured")
    assert reads["chainId"] == evm.params.chain_id and reads["spender"] == evm.params.spender
    assert "relayer" not in reads and "problems" not in reads

    relayer = status(ops, "--relayer", RELAYER.lower())
    assert (relayer["status"], relayer["relayer"]) == ("ok", RELAYER)
    assert int(relayer["relayerBalanceWei"]) > 0

    stranger = status(ops, "--relayer", recipient(4), exit=3)
    assert stranger["status"] == "down"
    assert stranger["problems"] == [f"{recipient(4)} is not a relayer of the spender",
                                    f"{recipient(4)} has no gas money"]

    keyed = status(ops, RELAYER_KEY=RELAYER_KEY.hex())  # with the key: its address is checked
    assert (keyed["status"], keyed["relayerKey"], keyed["relayer"]) == ("ok", "configured",
                                                                          RELAYER)

    down = status(ops, CHAIN_RPC_URL="http://127.0.0.1:9", exit=1)  # nothing listens
    assert down["status"] == "down" and down["relayerKey"] == "not_configured"


def test_chain_status_exits_with_what_it_found(ops: Ops, evm: EvmNode) -> None:
    """0 ready, 1 the node is down, 2 nothing to check (the settings), 3 the node answers
    and a check fails: a monitor reads the exit code, not the JSON. It exited 0 for all."""
    assert ops("chain", "status")[0] == 0
    assert ops("chain", "status", "--relayer", RELAYER)[0] == 0
    assert ops("chain", "status", CHAIN_RPC_URL="http://127.0.0.1:9")[0] == 1
    code, out, err = ops("chain", "status", CHAIN_BACKEND="in_process", CHAIN_RPC_URL=None)
    assert (code, out) == (2, "") and "CHAIN_BACKEND=json_rpc" in err
    code, out, err = ops("chain", "status", SPENDER_ADDRESS=None)
    assert (code, out) == (2, "") and "SVCSRV_SPENDER_ADDRESS" in err
    code, out, _ = ops("chain", "status", SPENDER_ADDRESS=recipient(2))  # no contract there
    assert code == 3 and json.loads(out)["problems"] == ["no contract at the spender address"]
    code, out, _ = ops("chain", "status", "--relayer", RELAYER, CHAIN_MAX_FEE_PER_GAS="1")
    assert code == 3 and "the base fee is above the fee cap" in out
    assert ops("chain", "status", "--relayer", "0x1234")[0] == 2
    assert "exit codes: 0 ready; 1 down" in help_text(ops, "chain", "status")


def test_relayer_status_exits_3_for_an_address_that_cannot_send(ops: Ops,
                                                               evm: EvmNode) -> None:
    """0: a relayer with gas money; 3: not a relayer, or one without gas money (both are
    shown, as before); 1: the node is down. `relayer list` shows retired relayers on
    purpose, so it exits 0 whatever they are."""
    assert ops("relayer", "status", RELAYER)[0] == 0
    assert ops("relayer", "status", recipient(4))[0] == 3  # not a relayer
    assert ops.owner("relayer", "add", recipient(4))[0] == 0
    code, out, _ = ops("relayer", "status", recipient(4))
    assert code == 3 and "\trelayer\t" in out and "no gas money, it cannot send" in out
    evm.chain.fund_gas(recipient(4))
    assert ops("relayer", "status", recipient(4))[0] == 0
    assert ops("relayer", "status", RELAYER, CHAIN_RPC_URL="http://127.0.0.1:9")[0] == 1
    assert ops("relayer", "list")[0] == 0
    assert "exit codes: 0 ready; 1 down" in help_text(ops, "relayer", "status")


def help_text(ops: Ops, *command: str) -> str:
    with pytest.raises(SystemExit) as stop:
        ops(*command, "--help")
    assert stop.value.code == 0
    return ops.capsys.readouterr().out


def statusz(start_router: RouterFactory, **settings: Any) -> tuple[int, dict[str, Any]]:
    with start_router(**settings) as router:
        answer = httpx.get(router.url + "/statusz",
                           headers={"host": f"api.localhost:{router.port}"}, timeout=10)
    chain: dict[str, Any] = answer.json()["checks"]["chain"]
    return answer.status_code, chain


def test_a_server_without_a_key_is_not_down_while_the_node_answers(
        start_router: RouterFactory, ops: Ops, evm: EvmNode) -> None:
    """Scale-out servers (no chain workers) need no key: 200, the chain ``ok`` and the key
    ``not_configured``, as `svc-ops chain status` says from the same settings. With chain
    workers it is the missing key that degrades the server, named as such; a node that does
    not answer is ``down`` either way. It used to be ``down`` in every case."""
    code, chain = statusz(start_router, **evm.server_settings(chain_workers=False))
    assert code == 200, chain
    assert (chain["status"], chain["relayerKey"]) == ("ok", "not_configured")
    assert "RELAYER_KEY is unset" in chain["detail"]
    operator = status(ops)
    assert (operator["status"], operator["relayerKey"]) == (chain["status"],
                                                            chain["relayerKey"])
    assert {k: operator[k] for k in READS} == {k: chain[k] for k in READS}

    code, chain = statusz(start_router, **evm.server_settings(chain_workers=True))
    assert code == 503
    assert (chain["status"], chain["relayerKey"]) == ("not_configured", "not_configured")
    assert "nothing is relayed or settled" in chain["detail"]

    nothing = evm.server_settings(chain_rpc_url="http://127.0.0.1:9")  # nothing listens
    code, chain = statusz(start_router, **nothing)
    assert code == 503
    assert (chain["status"], chain["relayerKey"]) == ("down", "not_configured")


def test_a_server_with_a_key_says_so(start_router: RouterFactory, ops: Ops,
                                     evm: EvmNode) -> None:
    key = RELAYER_KEY.hex()
    code, chain = statusz(start_router, **evm.server_settings(relayer_key=key,
                                                              chain_workers=False))
    assert code == 200
    assert (chain["status"], chain["relayerKey"]) == ("ok", "configured")
    operator = status(ops, RELAYER_KEY=key)
    assert {k: operator[k] for k in READS} == {k: chain[k] for k in READS}
