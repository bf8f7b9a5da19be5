"""Helpers over an in-process chain (eth-tester + py-evm) running TestUSDC and BudgetSpenderV2."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils.crypto import keccak
from web3 import EthereumTesterProvider, Web3
from web3.contract import Contract
from web3.contract.contract import ContractFunction
from web3.types import TxReceipt

from payments.chain.contracts import RevertInfo, load_artifact, revert_info

GAS = 8_000_000
BUDGET = 5_000_000  # 5 USDC of allowance per user
FUNDS = 100_000_000  # 100 USDC minted per user

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


def deploy(w3: Web3, name: str, sender: str, *args: Any) -> Contract:
    artifact = load_artifact(name)
    factory = w3.eth.contract(abi=artifact.abi, bytecode=artifact.bytecode)
    tx_hash = factory.constructor(*args).transact({"from": sender, "gas": GAS})
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash)
    address = receipt["contractAddress"]
    assert receipt["status"] == 1
    assert address is not None
    return w3.eth.contract(address=address, abi=artifact.abi)


def deploy_env() -> ChainEnv:
    w3 = Web3(EthereumTesterProvider())
    owner, relayer, stranger = list(w3.eth.accounts)[:3]
    usdc = deploy(w3, "TestUSDC", owner, owner)
    spender = deploy(w3, "BudgetSpenderV2", owner, usdc.address, owner)
    recipients = [Account.from_key(keccak(text=f"test-app-{i}")).address for i in range(3)]
    chain = ChainEnv(w3, usdc, spender, owner, relayer, stranger, recipients)
    chain.ok(spender.functions.setRelayer(relayer, True), owner)
    for recipient in recipients[:2]:  # the third stays off the allowlist
        chain.ok(spender.functions.setAllowedRecipient(recipient, True), owner)
    return chain
