"""A Hardhat node (npm, ``contracts/node_modules``) on a free loopback port, with our
contracts deployed by Hardhat's first (publicly known) account."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from web3 import HTTPProvider, Web3

from payments.chain.contracts import load_artifact
from payments.chain.params import ChainParams
from tests.support.services import free_port

CONTRACTS = Path(__file__).resolve().parents[2] / "contracts"
HARDHAT = CONTRACTS / "node_modules" / ".bin" / "hardhat"
CHAIN_ID = 31337
# Hardhat's default accounts 0 and 1: test keys published with Hardhat itself.
OWNER_KEY = bytes.fromhex("ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80")
RELAYER_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"


@dataclass(frozen=True)
class HardhatNode:
    url: str
    params: ChainParams


@contextmanager
def hardhat_node() -> Iterator[HardhatNode]:
    if not HARDHAT.exists():
        pytest.skip("Hardhat is not installed: run `npm ci` in contracts/")
    port = free_port()
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [str(HARDHAT), "node", "--hostname", "127.0.0.1", "--port", str(port)],
            cwd=CONTRACTS, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "HARDHAT_DISABLE_TELEMETRY_PROMPT": "true"})
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(url, process)
            yield HardhatNode(url, _deploy(url))
        finally:
            os.killpg(process.pid, signal.SIGTERM)  # the node and nothing else: its own group
            process.wait(10)


def _wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("the Hardhat node exited at start")
        try:
            answer = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId",
                                           "params": []}, timeout=2)
            if answer.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the Hardhat node did not answer within 60 s")


def _deploy(url: str) -> ChainParams:
    w3 = Web3(HTTPProvider(url))
    owner: LocalAccount = Account.from_key(OWNER_KEY)
    token = _create(w3, owner, "TestUSDC", owner.address)
    spender = _create(w3, owner, "BudgetSpenderV2", token, owner.address)
    return ChainParams(chain_id=CHAIN_ID, token=token, token_name="Test USDC",
                       token_version="1", spender=spender, network="hardhat", simulated=True)


def _create(w3: Web3, owner: LocalAccount, name: str, *args: object) -> str:
    artifact = load_artifact(name)
    factory = w3.eth.contract(abi=artifact.abi, bytecode=artifact.bytecode)
    tx = factory.constructor(*args).build_transaction({
        "from": owner.address, "nonce": w3.eth.get_transaction_count(owner.address),
        "gas": 6_000_000})
    signed = owner.sign_transaction(tx)
    receipt = w3.eth.wait_for_transaction_receipt(w3.eth.send_raw_transaction(
        signed.raw_transaction))
    assert receipt["status"] == 1 and receipt["contractAddress"]
    return str(receipt["contractAddress"])
