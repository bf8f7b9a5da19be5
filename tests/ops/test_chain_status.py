"""``svc-ops chain status`` from a host with no relayer key, and a server's ``/statusz`` with
none: the node's state and the missing key are told apart, and the two agree."""

from __future__ import annotations

import json
from typing import Any

import httpx
from eth_account import Account

from payments.chain.in_process import RELAYER_KEY
from tests.chain.world import recipient
from tests.ops.conftest import Ops
from tests.support.evm_node import EvmNode
from tests.support.router import RouterFactory

RELAYER = str(Account.from_key(RELAYER_KEY).address)
READS = ("chainId", "spender", "token", "simulated")


def status(ops: Ops, *args: str, **env: str | None) -> dict[str, Any]:
    code, out, err = ops("chain", "status", *args, **env)
    assert code == 0, err
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

    stranger = status(ops, "--relayer", recipient(4))
    assert stranger["status"] == "down"
    assert stranger["problems"] == [f"{recipient(4)} is not a relayer of the spender",
                                    f"{recipient(4)} has no gas money"]

    keyed = status(ops, RELAYER_KEY=RELAYER_KEY.hex())  # with the key: its address is checked
    assert (keyed["status"], keyed["relayerKey"], keyed["relayer"]) == ("ok", "configured",
                                                                          RELAYER)

    down = status(ops, CHAIN_RPC_URL="http://127.0.0.1:9")  # nothing listens
    assert down["status"] == "down" and down["relayerKey"] == "not_configured"


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
