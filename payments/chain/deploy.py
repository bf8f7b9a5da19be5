"""Deploying BudgetSpenderV2 to a node (``svc-ops contract deploy``).

The committed artifact, with the constructor the dev chain and the local topology give it
(the token, then the owner), signed here with the owner key as every owner transaction is:
EIP-1559, fees under the operator's cap, no gas spent on a deploy the node's estimate says
would fail. What is checked before signing: the node is on the chain the settings name,
and the token has code there. What is checked once mined, with the settings'
confirmations: code at the new address, its ``token()`` and its ``owner()``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_typing import ChecksumAddress, HexStr
from eth_utils.address import to_checksum_address
from web3 import Web3
from web3.exceptions import TransactionNotFound
from web3.types import TxReceipt

from payments.chain.contracts import load_artifact, revert_info
from payments.chain.gateway import ChainError, ChainRevert, ChainUnavailable
from payments.chain.reader import hex32, suggested_fees, unavailable

CONTRACT = "BudgetSpenderV2"
# The node's estimate plus a quarter: what the creation costs varies by nothing we pass, but
# an estimate taken a block early can be a little short.
GAS_MARGIN = 5 / 4


class DeployRefused(ChainError):
    """Nothing was sent: the node, the settings or the owner's funds say it would fail."""


@dataclass(frozen=True)
class Deployment:
    address: str  # checksummed
    tx_hash: str
    block_number: int
    owner: str
    token: str
    chain_id: int


def deploy_spender(w3: Web3, owner_key: str, token: str, *, chain_id: int,
                   confirmations: int = 1, max_fee_per_gas: int | None = None,
                   timeout: float = 300.0, poll: float = 1.0) -> Deployment:
    """Deploy, wait for ``confirmations`` and check the contract; the owner is the key's
    account. Raises :class:`DeployRefused` before sending, ``FeeAboveCap`` while the base
    fee is above the cap, :class:`ChainRevert`, or :class:`ChainUnavailable`."""
    owner: LocalAccount = Account.from_key(owner_key)
    try:
        tx_hash = _send(w3, owner, to_checksum_address(token), chain_id, max_fee_per_gas)
        return _confirmed(w3, tx_hash, owner.address, to_checksum_address(token), chain_id,
                          max(confirmations, 1), timeout, poll)
    except ChainError:
        raise
    except Exception as exc:
        raise unavailable(exc) from None


def _send(w3: Web3, owner: LocalAccount, token: ChecksumAddress, chain_id: int,
          cap: int | None) -> str:
    if (found := int(w3.eth.chain_id)) != chain_id:
        raise DeployRefused(f"the node is on chain {found}, and SVCSRV_CHAIN_ID says "
                            f"{chain_id}: nothing was sent")
    if not w3.eth.get_code(token):
        raise DeployRefused(f"no contract at the token address {token} (SVCSRV_USDC_ADDRESS) "
                            f"on chain {chain_id}: nothing was sent")
    artifact = load_artifact(CONTRACT)
    factory = w3.eth.contract(abi=artifact.abi, bytecode=artifact.bytecode)
    data = factory.constructor(token, owner.address).data_in_transaction
    # Asked here: nodes word the refusal each their own way (some in the estimate, some
    # only once the transaction is pooled).
    who = f"{owner.address} (the owner key's account)"
    if not (balance := w3.eth.get_balance(owner.address)):
        raise DeployRefused(f"{who} holds no gas money: nothing was sent")
    try:
        gas = int(w3.eth.estimate_gas({"from": owner.address, "data": data}) * GAS_MARGIN)
    except Exception as exc:
        if "revert" in str(exc).lower():
            raise ChainRevert(revert_info(exc)) from None
        raise
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


def _confirmed(w3: Web3, tx_hash: str, owner: str, token: str, chain_id: int,
               confirmations: int, timeout: float, poll: float) -> Deployment:
    deadline = time.monotonic() + timeout
    while (receipt := _receipt(w3, tx_hash, confirmations)) is None:
        if time.monotonic() >= deadline:
            raise ChainUnavailable(f"no receipt with {confirmations} confirmation(s) for the "
                                   f"deploy {tx_hash} within {timeout:.0f}s: look it up "
                                   "before deploying again")
        time.sleep(poll)
    address = receipt["contractAddress"]
    if receipt["status"] != 1 or address is None:
        raise ChainError(f"the deploy {tx_hash} reverted")
    spender = w3.eth.contract(address=address, abi=load_artifact(CONTRACT).abi)
    if not w3.eth.get_code(address) or spender.functions.token().call() != token \
            or spender.functions.owner().call() != owner:
        raise ChainError(f"the contract at {address} (tx {tx_hash}) is not the one deployed: "
                         "its code, token or owner differ")
    return Deployment(address=str(address), tx_hash=tx_hash,
                      block_number=int(receipt["blockNumber"]), owner=owner, token=token,
                      chain_id=chain_id)


def _receipt(w3: Web3, tx_hash: str, confirmations: int) -> TxReceipt | None:
    """The receipt once it has ``confirmations``, else None."""
    try:
        receipt = w3.eth.get_transaction_receipt(HexStr(tx_hash))
    except TransactionNotFound:
        return None
    mined = int(receipt["blockNumber"])
    return receipt if w3.eth.block_number - mined + 1 >= confirmations else None
