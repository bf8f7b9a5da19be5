"""A server on a JSON-RPC node with no relayer key (compose's and the cluster's servers):
every chain read it serves comes from the node through the keyless reader, and nothing in
it can sign. The node is the in-process EVM behind JSON-RPC (tests/support/evm_node.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.chain.in_process import RELAYER_KEY
from payments.chain.reader import ChainReader
from payments.chain.web3_chain import Web3Chain
from payments.db import utcnow
from payments.ledger.models import Authorization, RelayStatus
from router.chain import ServerChain, open_chain
from router.chain_params import chain_params
from tests.ledger.flow import build_world, sign_permit, wallet
from tests.support.evm_node import EvmNode, evm_node
from tests.support.router import RouterFactory, RunningRouter, router_settings

FUNDS = 2_345_678


@pytest.fixture
def evm() -> Iterator[EvmNode]:
    with evm_node() as node:
        yield node


def portal(router: RunningRouter) -> httpx.Client:
    return httpx.Client(base_url=router.url, timeout=10,
                        headers={"host": f"portal.localhost:{router.port}"})


def statusz(router: RunningRouter) -> tuple[int, dict[str, Any]]:
    answer = httpx.get(router.url + "/statusz", timeout=10,
                       headers={"host": f"api.localhost:{router.port}"})
    chain: dict[str, Any] = answer.json()["checks"]["chain"]
    return answer.status_code, chain


def relay_on_chain(evm: EvmNode, owner: Any, value: int) -> None:
    """A permit of ``owner`` spent on the node behind the server's back (another relayer):
    the token's nonce moves on chain and the server's ledger knows nothing of it."""
    permit = sign_permit(owner, value, nonce=0, params=evm.params)
    signature = bytes.fromhex(permit["signature"].removeprefix("0x"))
    tx = evm.chain.sign_relay_permit(owner.address, value, permit["deadline"], signature)
    evm.chain.broadcast(tx)
    receipt = evm.chain.wait_receipt(tx.tx_hash, 10)
    assert receipt is not None and receipt.succeeded


def test_a_server_without_a_key_serves_the_wallet_reads_from_its_node(
        start_router: RouterFactory, evm: EvmNode) -> None:
    """The portal's wallet reads (permit nonce, USDC balance) over HTTP carry the node's
    values; they used to come back empty without a key (a nonce from the ledger alone, no
    balance), which is why the servers were given a key nothing sent with."""
    owner, stranger = wallet(41), wallet(42)
    evm.chain.faucet(owner.address, FUNDS)
    relay_on_chain(evm, owner, 1_000_000)
    with start_router(**evm.server_settings(chain_workers=False)) as router, \
            portal(router) as c:
        state = c.get("/api/portal/wallet", params={"address": owner.address})
        assert state.status_code == 200, state.text
        assert (state.json()["permitNonce"], state.json()["usdcBalance"]) == ("1", str(FUNDS))
        deadline = int((utcnow() + timedelta(days=30)).timestamp())
        permit = c.get("/api/portal/permit", params={"owner": owner.address,
                                                      "value": "5000000", "deadline": deadline})
        assert permit.json()["typedData"]["message"]["nonce"] == "1"  # the token's next
        balance = c.get("/api/public/usdc-balance", params={"address": owner.address})
        assert balance.json()["balanceAtomic"] == str(FUNDS)
        empty = c.get("/api/portal/wallet", params={"address": stranger.address}).json()
        assert (empty["permitNonce"], empty["usdcBalance"]) == ("0", "0")

        code, chain = statusz(router)
        assert code == 200, chain
        assert (chain["status"], chain["relayerKey"]) == ("ok", "not_configured")
        assert "relayer" not in chain and "problems" not in chain


def test_a_server_without_a_key_signs_nothing_and_says_so(
        start_router: RouterFactory, sessions: sessionmaker[Session], evm: EvmNode,
        caplog: pytest.LogCaptureFixture) -> None:
    """Asked to run the chain workers without a key, the server starts none and says so: a
    permit the API accepts waits in the outbox (`svc-ops chain run` relays it), nothing
    reaches the node, and /statusz names the missing key (503) instead of failing a
    request."""
    user = wallet(43)
    caplog.set_level(logging.WARNING, logger="router.chain")
    with start_router(**evm.server_settings(chain_workers=True,
                                            chain_worker_interval=0.05)) as router:
        assert router.service.resources.workers is None
        world = build_world(router, sessions)
        world.authorize(user, 1_000_000)
        code, chain = statusz(router)
        time.sleep(0.3)  # cycles a worker would have run
    assert "without a relayer key" in caplog.text
    assert "relays and settles nothing" in caplog.text
    assert code == 503
    assert (chain["status"], chain["relayerKey"]) == ("not_configured", "not_configured")
    assert "RELAYER_KEY is unset" in chain["detail"]
    assert "nothing is relayed or settled" in chain["detail"]
    with sessions() as session:
        budget = session.scalars(select(Authorization)).one()
    assert budget.relay_status is RelayStatus.PENDING
    assert evm.chain.permit_nonce(user.address) == 0


def opened(evm: EvmNode, sessions: sessionmaker[Session], **overrides: Any) -> ServerChain:
    settings = router_settings("sqlite://", **evm.server_settings(**overrides))
    return open_chain(settings, chain_params(settings), sessions)


def test_only_a_server_running_the_chain_workers_holds_a_gateway(
        sessions: sessionmaker[Session], evm: EvmNode) -> None:
    """What signs is built only where the chain workers run with a key: a server without
    them keeps no signer even with a key set, and its reads are the keyless reader's."""
    key = RELAYER_KEY.hex()
    for overrides in ({"chain_workers": False}, {"chain_workers": True},
                      {"chain_workers": False, "relayer_key": key}):
        chain = opened(evm, sessions, **overrides)
        assert chain.gateway is None, overrides
        assert type(chain.reads) is ChainReader, overrides
        assert not isinstance(chain.reads, Web3Chain)
    working = opened(evm, sessions, chain_workers=True, relayer_key=key)
    assert isinstance(working.gateway, Web3Chain)
    assert working.reads is working.gateway and working.relayer == working.gateway.relayer
