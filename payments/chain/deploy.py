"""Deploying our contracts: the one path every deploy takes.

``svc-ops contract deploy`` (BudgetSpenderV2 on a node, ops/contract.py), the dev chain
(eth-tester, payments/chain/in_process.py) and the local topology (a Hardhat node,
ops/cluster/services.py) all deploy here, so what they deploy cannot drift apart: the
committed artifact with its constructor (BudgetSpenderV2: the token, then the owner;
TestUSDC: the owner), the owner being the key's account, signed with that key as every
owner transaction is (EIP-1559, fees under the operator's cap, no gas spent on a deploy
the node's estimate says would fail). Checked before signing: the node is on the chain the
settings name, the token has code there, the owner's account can pay the gas. Checked once
mined, with the confirmations asked for: :func:`check_deployed`. The dev chain and the
topology then make their relayers through :func:`~payments.chain.relayers.set_relayer`,
the transaction of ``svc-ops relayer add`` (:func:`deploy_local`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_typing import HexStr
from eth_utils.address import to_checksum_address
from web3 import Web3
from web3.contract import Contract
from web3.exceptions import TransactionNotFound
from web3.types import TxReceipt

from payments.chain.contracts import load_artifact, revert_info
from payments.chain.gateway import ChainError, ChainRevert, ChainUnavailable
from payments.chain.params import TEST_USDC_NAME, TEST_USDC_VERSION, ChainParams
from payments.chain.reader import ChainReader, hex32, suggested_fees, unavailable
from payments.chain.relayers import set_relayer

SPENDER = "BudgetSpenderV2"
TEST_USDC = "TestUSDC"
# The node's estimate plus a quarter: what the creation costs varies by nothing we pass, but
# an estimate taken a block early can be a little short.
GAS_MARGIN = 5 / 4
# A local chain's deploys are given this limit instead (ample for either contract, as the
# dev chain and the topology always gave them): eth-tester estimates by executing the
# constructor a dozen times over, which was most of what a deploy added to dev's start.
LOCAL_DEPLOY_GAS = 6_000_000


class DeployRefused(ChainError):
    """Nothing was sent: the node, the settings or the owner's funds say it would fail."""


@dataclass(frozen=True)
class Deployment:
    address: str  # checksummed
    tx_hash: str
    block_number: int
    owner: str
    token: str  # the token the contract moves: TestUSDC's is itself
    chain_id: int


@dataclass(frozen=True)
class LocalContracts:
    """A local chain's contracts (dev, the topology): TestUSDC and its BudgetSpenderV2."""

    token: Deployment
    spender: Deployment
    relayers: tuple[str, ...]

    def params(self, network: str) -> ChainParams:
        return ChainParams(
            chain_id=self.spender.chain_id, token=self.token.address,
            token_name=TEST_USDC_NAME, token_version=TEST_USDC_VERSION,
            spender=self.spender.address, network=network, simulated=True)


def deploy_spender(w3: Web3, owner_key: str, token: str, *, chain_id: int,
                   confirmations: int = 1, max_fee_per_gas: int | None = None,
                   gas: int | None = None, timeout: float = 300.0,
                   poll: float = 1.0) -> Deployment:
    """Deploy, wait for ``confirmations`` and check the contract; the owner is the key's
    account, ``gas`` the limit (None: the node's estimate, plus a margin). Raises
    :class:`DeployRefused` before sending, ``FeeAboveCap`` while the base fee is above the
    cap, :class:`ChainRevert`, or :class:`ChainUnavailable`."""
    owner: LocalAccount = Account.from_key(owner_key)
    address = to_checksum_address(token)
    return _deploy(w3, owner, SPENDER, (address, owner.address), token=address,
                   chain_id=chain_id, confirmations=confirmations, cap=max_fee_per_gas,
                   gas=gas, timeout=timeout, poll=poll)


def deploy_local(w3: Web3, owner_key: str, relayers: Iterable[str] = (), *,
                 poll: float = 0.01, timeout: float = 60.0) -> LocalContracts:
    """A fresh local chain's contracts, by the owner key's account: TestUSDC (its next
    nonce), then BudgetSpenderV2 for it (the one after), then each of ``relayers`` made a
    relayer. CREATE addresses follow from the account and its nonces, so a fresh chain
    gets the same addresses every time (``payments.chain.params.in_process_params``)."""
    chain_id = int(w3.eth.chain_id)
    owner: LocalAccount = Account.from_key(owner_key)
    token = _deploy(w3, owner, TEST_USDC, (owner.address,), token=None, chain_id=chain_id,
                    confirmations=1, cap=None, gas=LOCAL_DEPLOY_GAS, timeout=timeout, poll=poll)
    spender = deploy_spender(w3, owner_key, token.address, chain_id=chain_id,
                             gas=LOCAL_DEPLOY_GAS, timeout=timeout, poll=poll)
    contracts = LocalContracts(token, spender, tuple(map(to_checksum_address, relayers)))
    # The owner transaction of `svc-ops relayer add`; the reader's network label is unused.
    reader = ChainReader(w3, contracts.params("local"), poll_interval=poll)
    for relayer in contracts.relayers:
        set_relayer(reader, owner_key, relayer, True)
    return contracts


def check_deployed(w3: Web3, name: str, address: str, *, owner: str,
                   token: str | None) -> None:
    """What every deploy checks once mined: code at ``address``, its ``owner()`` and, for
    BudgetSpenderV2, its ``token()``. Raises :class:`ChainError` naming what differs."""
    contract = w3.eth.contract(address=to_checksum_address(address),
                               abi=load_artifact(name).abi)
    if (problem := _difference(w3, contract, name, owner, token)) is not None:
        raise ChainError(f"the {name} at {address} is not the one deployed: {problem}")


def _difference(w3: Web3, contract: Contract, name: str, owner: str,
                token: str | None) -> str | None:
    if not w3.eth.get_code(contract.address):
        return "it has no code"
    if (found := contract.functions.owner().call()) != owner:
        return f"its owner is {found}, not {owner}"
    if name == SPENDER and (found := contract.functions.token().call()) != token:
        return f"its token is {found}, not {token}"
    return None


def _deploy(w3: Web3, owner: LocalAccount, name: str, args: tuple[str, ...], *,
            token: str | None, chain_id: int, confirmations: int, cap: int | None,
            gas: int | None, timeout: float, poll: float) -> Deployment:
    try:
        if (found := int(w3.eth.chain_id)) != chain_id:
            raise DeployRefused(f"the node is on chain {found}, and SVCSRV_CHAIN_ID says "
                                f"{chain_id}: nothing was sent")
        if token is not None and not w3.eth.get_code(to_checksum_address(token)):
            raise DeployRefused(f"no contract at the token address {token} "
                                f"(SVCSRV_USDC_ADDRESS) on chain {chain_id}: nothing was sent")
        tx_hash = _send(w3, owner, name, args, chain_id, cap, gas)
        receipt = _mined(w3, tx_hash, max(confirmations, 1), timeout, poll)
        address = str(receipt["contractAddress"])
        try:
            check_deployed(w3, name, address, owner=owner.address, token=token)
        except ChainError as exc:
            raise ChainError(f"{exc} (tx {tx_hash})") from None
        return Deployment(address=address, tx_hash=tx_hash,
                          block_number=int(receipt["blockNumber"]), owner=owner.address,
                          token=token or address, chain_id=chain_id)
    except ChainError:
        raise
    except Exception as exc:
        raise unavailable(exc) from None


def _send(w3: Web3, owner: LocalAccount, name: str, args: tuple[str, ...], chain_id: int,
          cap: int | None, gas: int | None) -> str:
    artifact = load_artifact(name)
    factory = w3.eth.contract(abi=artifact.abi, bytecode=artifact.bytecode)
    data = factory.constructor(*args).data_in_transaction
    # Asked here: nodes word the refusal each their own way (some in the estimate, some
    # only once the transaction is pooled).
    who = f"{owner.address} (the owner key's account)"
    if not (balance := w3.eth.get_balance(owner.address)):
        raise DeployRefused(f"{who} holds no gas money: nothing was sent")
    if gas is None:
        gas = _estimate(w3, owner.address, data)
    max_fee, priority = suggested_fees(w3, cap)
    if balance < gas * max_fee:
        raise DeployRefused(f"{who} holds {balance} wei and the deploy may cost up to "
                            f"{gas * max_fee} wei of gas: nothing was sent")
    tx: dict[str, Any] = {
        "type": 2, "chainId": chain_id, "data": data, "value": 0,
        "nonce": w3.eth.get_transaction_count(owner.address, "pending"), "gas": gas,
        "maxFeePerGas": max_fee, "maxPriorityFeePerGas": priority}
    signed = owner.sign_transaction(tx)
    w3.eth.send_raw_transaction(signed.raw_transaction)
    return hex32(signed.hash)


def _estimate(w3: Web3, sender: str, data: HexStr) -> int:
    try:
        return int(w3.eth.estimate_gas({"from": sender, "data": data}) * GAS_MARGIN)
    except Exception as exc:
        if "revert" in str(exc).lower():
            raise ChainRevert(revert_info(exc)) from None
        raise


def _mined(w3: Web3, tx_hash: str, confirmations: int, timeout: float,
           poll: float) -> TxReceipt:
    deadline = time.monotonic() + timeout
    while (receipt := _receipt(w3, tx_hash, confirmations)) is None:
        if time.monotonic() >= deadline:
            raise ChainUnavailable(f"no receipt with {confirmations} confirmation(s) for the "
                                   f"deploy {tx_hash} within {timeout:.0f}s: look it up "
                                   "before deploying again")
        time.sleep(poll)
    if receipt["status"] != 1 or receipt["contractAddress"] is None:
        raise ChainError(f"the deploy {tx_hash} reverted")
    return receipt


def _receipt(w3: Web3, tx_hash: str, confirmations: int) -> TxReceipt | None:
    """The receipt once it has ``confirmations``, else None."""
    try:
        receipt = w3.eth.get_transaction_receipt(HexStr(tx_hash))
    except TransactionNotFound:
        return None
    mined = int(receipt["blockNumber"])
    return receipt if w3.eth.block_number - mined + 1 >= confirmations else None
