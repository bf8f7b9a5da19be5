"""Helpers over an in-process chain (eth-tester + py-evm) running TestUSDC and BudgetSpenderV2.

The contracts are deployed as every other chain's are, through
:func:`payments.chain.deploy.deploy_local` (and its check once mined), so what these tests
exercise is what the dev chain, the local topology and ``svc-ops contract deploy`` make.
The tests then send as eth-tester's unlocked accounts, the owner being account 0.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak
from web3 import EthereumTesterProvider, Web3
from web3.contract import Contract
from web3.contract.contract import ContractFunction
from web3.types import TxReceipt

from payments.chain.contracts import RevertInfo, load_artifact, revert_info
from payments.chain.deploy import deploy_local
from payments.chain.in_process import DEPLOYER_KEY

GAS = 8_000_000
BUDGET = 5_000_000  # 5 USDC of allowance per user
FUNDS = 100_000_000  # 100 USDC minted per user

OWNER_KEY = "0x" + DEPLOYER_KEY.hex()  # eth-tester account 0, the contracts' owner

PairArg = tuple[str, str, list[tuple[bytes, int]]]


def user_account(index: int) -> LocalAccount:
    account: LocalAccount = Account.from_key(keccak(text=f"test-user-{index}"))
    return account


@dataclass
class ChainEnv:
    w3: Web3
    usdc: Contract
    spender: Contract
    owner: str
    relayer: str
    stranger: str
    recipients: list[str]

    def send(self, fn: ContractFunction, sender: str) -> TxReceipt:
        tx_hash = fn.transact({"from": sender, "gas": GAS})
        return self.w3.eth.wait_for_transaction_receipt(tx_hash)

    def ok(self, fn: ContractFunction, sender: str) -> TxReceipt:
        receipt = self.send(fn, sender)
        assert receipt["status"] == 1
        return receipt

    def expect_revert(self, fn: ContractFunction, sender: str) -> RevertInfo:
        """The revert a call simulates; the same transaction sent for real must fail too."""
        with pytest.raises(Exception) as caught:  # noqa: PT011 - web3 or eth-tester type
            fn.call({"from": sender, "gas": GAS})
        assert self.send(fn, sender)["status"] == 0
        return revert_info(caught.value)

    def sign_permit(
        self, user: LocalAccount, value: int, spender: str | None = None, deadline: int = 0
    ) -> tuple[int, int, int, bytes, bytes]:
        deadline = deadline or int(time.time()) + 3600
        signed = Account.sign_typed_data(
            user.key,
            domain_data={
                "name": "Test USDC",
                "version": "1",
                "chainId": self.w3.eth.chain_id,
                "verifyingContract": self.usdc.address,
            },
            message_types={
                "Permit": [
                    {"name": "owner", "type": "address"},
                    {"name": "spender", "type": "address"},
                    {"name": "value", "type": "uint256"},
                    {"name": "nonce", "type": "uint256"},
                    {"name": "deadline", "type": "uint256"},
                ]
            },
            message_data={
                "owner": user.address,
                "spender": spender or self.spender.address,
                "value": value,
                "nonce": self.usdc.functions.nonces(user.address).call(),
                "deadline": deadline,
            },
        )
        return value, deadline, signed.v, signed.r.to_bytes(32, "big"), signed.s.to_bytes(32, "big")

    def relay_permit(self, user: LocalAccount, value: int) -> TxReceipt:
        args = self.sign_permit(user, value)
        return self.ok(self.spender.functions.relayPermit(user.address, *args), self.relayer)

    def fund(self, user: LocalAccount, budget: int = BUDGET) -> None:
        self.ok(self.usdc.functions.mint(user.address, FUNDS), self.owner)
        self.relay_permit(user, budget)

    def balance(self, address: str) -> int:
        result: int = self.usdc.functions.balanceOf(address).call()
        return result

    def batch(self, pairs: Sequence[PairArg]) -> ContractFunction:
        return self.spender.functions.chargeBatch(list(pairs))


def deploy_env() -> ChainEnv:
    """A chain as :func:`deploy_chain` leaves it. That deploy runs once per test process;
    each call reverts eth-tester to the snapshot taken right after it, so every test starts
    from the same state, for a tenth of what a deploy costs."""
    deployed, snapshot = _deployed()
    deployed.w3.provider.ethereum_tester.revert_to_snapshot(snapshot)  # type: ignore[attr-defined]
    return replace(deployed, recipients=list(deployed.recipients))


@functools.cache
def _deployed() -> tuple[ChainEnv, int]:
    env = deploy_chain()
    return env, env.w3.provider.ethereum_tester.take_snapshot()  # type: ignore[attr-defined]


def deploy_chain() -> ChainEnv:
    """A fresh chain: TestUSDC and BudgetSpenderV2 deployed by ``deploy_local`` (eth-tester's
    account 0 the owner, account 1 made a relayer), then two recipients allowlisted."""
    w3 = Web3(EthereumTesterProvider())
    owner, relayer, stranger = list(w3.eth.accounts)[:3]
    assert Account.from_key(OWNER_KEY).address == owner
    contracts = deploy_local(w3, OWNER_KEY, [relayer])
    env = ChainEnv(
        w3, _contract(w3, "TestUSDC", contracts.token.address),
        _contract(w3, "BudgetSpenderV2", contracts.spender.address), owner, relayer, stranger,
        [Account.from_key(keccak(text=f"test-app-{i}")).address for i in range(3)])
    for recipient in env.recipients[:2]:  # the third stays off the allowlist
        env.ok(env.spender.functions.setAllowedRecipient(recipient, True), owner)
    return env


def _contract(w3: Web3, name: str, address: str) -> Contract:
    return w3.eth.contract(address=to_checksum_address(address), abi=load_artifact(name).abi)
