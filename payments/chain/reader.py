"""The chain without the relayer's key: reads, receipts, readiness, and owner transactions.

What a monitoring host, a server with no key and the operator's owner commands need: none of
it signs with the relayer key, so none of it needs one. Owner transactions are signed with
the key handed in for that one call (``transact_as``) and never kept.
:class:`~payments.chain.web3_chain.Web3Chain` adds the relayer key and what signs with it.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_typing import HexStr
from eth_utils.address import to_checksum_address
from web3 import Web3
from web3.contract import Contract
from web3.contract.contract import ContractFunction
from web3.exceptions import ContractLogicError, MismatchedABI, TransactionNotFound
from web3.types import LogReceipt, TxParams

from payments.chain.contracts import RevertInfo, load_artifact, revert_info
from payments.chain.gateway import (
    ChainRevert,
    ChainUnavailable,
    ChargeSettledLog,
    FeeAboveCap,
    NonceTaken,
    Readiness,
    Receipt,
    SignedTx,
    TransferLog,
)
from payments.chain.params import ChainParams

OWNER_TX_GAS = 200_000
DEFAULT_PRIORITY_FEE = 1_000_000_000  # 1 gwei, when the node cannot suggest one
_ALREADY_SENT = ("already known", "known transaction", "already imported")
# The nonce is held by some transaction: ours (mined, or a node that does not say "known")
# or another one, e.g. a second worker's on the same key. Only the hash tells which.
_NONCE_HELD = ("nonce too low", "invalid transaction nonce", "replacement transaction")

_NONCE_GAP = re.compile(r"expected ([0-9]+), but got ([0-9]+)")

T = TypeVar("T")


def capped_fees(base: int, priority: int, cap: int | None) -> tuple[int, int]:
    """(maxFeePerGas, maxPriorityFeePerGas) for a base fee and a suggested tip: twice the
    base fee plus the tip, at most ``cap``; a cap below the base fee refuses (FeeAboveCap)."""
    max_fee = 2 * base + priority
    if cap is None:
        return max_fee, priority
    refuse_above_cap(base, cap)
    max_fee = min(max_fee, cap)
    return max_fee, min(priority, max_fee)


def refuse_above_cap(base: int, cap: int) -> None:
    """FeeAboveCap when no transaction offering at most ``cap`` could enter a block."""
    if cap < base:
        raise FeeAboveCap(f"the base fee is {base} wei per gas, above the cap of {cap} "
                          "(SVCSRV_CHAIN_MAX_FEE_PER_GAS): nothing is signed until it falls")


def suggested_fees(w3: Web3, cap: int | None) -> tuple[int, int]:
    """EIP-1559: room for the base fee to double, plus the node's suggested tip; never
    above the operator's cap, and nothing at all while the base fee is over it."""
    base = latest_base_fee(w3)
    try:
        priority = int(w3.eth.max_priority_fee)
    except Exception:  # not every node implements eth_maxPriorityFeePerGas
        priority = DEFAULT_PRIORITY_FEE
    return capped_fees(base, priority, cap)


def latest_base_fee(w3: Web3) -> int:
    return int(w3.eth.get_block("latest").get("baseFeePerGas") or 0)


def hex32(value: bytes | str) -> str:
    text = value.hex() if isinstance(value, bytes) else value
    return "0x" + text.removeprefix("0x").lower()


def unavailable(exc: BaseException) -> ChainUnavailable:
    """A node failure as an operator may read it: the exception type and a short message
    only, withheld when it names a URL (a provider URL can carry an API key)."""
    message = str(exc).split("\n", 1)[0][:200]
    if "http" in message.lower():
        message = "(message withheld: it names the node URL)"
    return ChainUnavailable(f"{type(exc).__name__}: {message}")


class ChainReader:
    # What a simulation's revert raises: web3's error from a node; the embedded chain adds
    # eth-tester's own (InProcessChain), which a server on a node need not import.
    reverts: tuple[type[Exception], ...] = (ContractLogicError,)

    def __init__(self, w3: Web3, params: ChainParams, *, confirmations: int = 1,
                 poll_interval: float = 0.5, max_fee_per_gas: int | None = None) -> None:
        self._w3 = w3
        self._fee_cap = max_fee_per_gas
        self._params = params
        self._confirmations = max(confirmations, 1)
        self._poll = poll_interval
        self._lock = threading.RLock()
        self.spender: Contract = w3.eth.contract(
            address=to_checksum_address(params.spender),
            abi=load_artifact("BudgetSpenderV2").abi)
        self.token: Contract = w3.eth.contract(
            address=to_checksum_address(params.token), abi=load_artifact("TestUSDC").abi)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(chain_id={self._params.chain_id})"

    @property
    def params(self) -> ChainParams:
        return self._params

    @property
    def confirmations(self) -> int:
        return self._confirmations

    # -- sending (any key) ----------------------------------------------------------------

    def broadcast(self, tx: SignedTx) -> None:
        try:
            with self._lock:
                self._w3.eth.send_raw_transaction(HexStr(tx.raw))
        except Exception as exc:
            message = str(exc).lower()
            gap = _NONCE_GAP.search(message)
            if gap and int(gap.group(2)) > int(gap.group(1)):
                # eth-tester keeps no queue: an earlier nonce has to be sent first
                raise ChainUnavailable(f"nonce gap: the chain expects {gap.group(1)}") from None
            if any(marker in message for marker in _ALREADY_SENT):
                return  # the node has it (or mined it); the receipt will tell
            if any(marker in message for marker in _NONCE_HELD):
                if self._knows(tx.tx_hash):
                    return
                raise NonceTaken(f"nonce {tx.nonce} is held by another transaction") from None
            raise unavailable(exc) from None

    def transact_as(self, key: bytes | str, fn: ContractFunction,
                    gas: int = OWNER_TX_GAS, timeout: float = 120.0) -> Receipt:
        """Simulate, sign with ``key``, send and wait: for owner-only calls, never relays."""
        account: LocalAccount = Account.from_key(key)
        tx = self._simulate_and_sign(account, fn, gas, lambda: self._read(
            lambda: self._w3.eth.get_transaction_count(account.address, "pending")))
        self.broadcast(tx)
        receipt = self.wait_receipt(tx.tx_hash, timeout)
        if receipt is None:
            raise ChainUnavailable(f"no receipt for {tx.tx_hash} within {timeout:.0f}s")
        if not receipt.succeeded:
            raise ChainRevert(self.revert_reason(tx.tx_hash))
        return receipt

    def _knows(self, tx_hash: str) -> bool:
        def read() -> bool:
            try:
                self._w3.eth.get_transaction(tx_hash)  # type: ignore[arg-type]
            except TransactionNotFound:
                return False
            return True
        return self._read(read)

    def receipt(self, tx_hash: str) -> Receipt | None:
        def read() -> Receipt | None:
            try:
                raw = self._w3.eth.get_transaction_receipt(tx_hash)  # type: ignore[arg-type]
            except TransactionNotFound:
                return None
            head = self._w3.eth.block_number
            return Receipt(
                tx_hash=hex32(raw["transactionHash"]), status=int(raw["status"]),
                block_number=int(raw["blockNumber"]),
                confirmations=head - int(raw["blockNumber"]) + 1, gas_used=int(raw["gasUsed"]),
                charges=tuple(c for lg in raw["logs"] if (c := self._charge_log(lg))),
                transfers=tuple(t for lg in raw["logs"] if (t := self._transfer_log(lg))))
        return self._read(read)

    def wait_receipt(self, tx_hash: str, timeout: float) -> Receipt | None:
        deadline = time.monotonic() + timeout
        while True:
            found = self.receipt(tx_hash)
            if found is not None and found.confirmations >= self._confirmations:
                return found
            if time.monotonic() >= deadline:
                return None
            time.sleep(self._poll)

    def revert_reason(self, tx_hash: str) -> RevertInfo:
        def replay() -> RevertInfo:
            tx = self._w3.eth.get_transaction(tx_hash)  # type: ignore[arg-type]
            block = int(tx["blockNumber"] or 1)
            call: TxParams = {"from": tx["from"], "to": tx["to"], "data": tx["input"],
                              "gas": tx["gas"]}
            try:
                self._w3.eth.call(call, max(block - 1, 0))
            except Exception as exc:
                return revert_info(exc)
            return RevertInfo("Reverted")
        return self._read(replay)

    def mined_nonce(self, address: str) -> int:
        def read() -> int:
            head = self._w3.eth.block_number
            block = max(head - self._confirmations + 1, 0)
            return int(self._w3.eth.get_transaction_count(to_checksum_address(address), block))
        return self._read(read)

    # -- reads ---------------------------------------------------------------------------

    def block_number(self) -> int:
        return self._read(lambda: int(self._w3.eth.block_number))

    def is_settled(self, charge_id: bytes) -> bool:
        return bool(self._read(self.spender.functions.isSettled(charge_id).call))

    def charge_settled_logs(self, from_block: int, to_block: int,
                            charge_id: bytes | None = None) -> list[ChargeSettledLog]:
        filters = {} if charge_id is None else {"chargeId": charge_id}

        def read() -> list[ChargeSettledLog]:
            logs = self.spender.events.ChargeSettled.get_logs(
                from_block=from_block, to_block=to_block, argument_filters=filters)
            return [self._settled(lg) for lg in logs]
        return self._read(read)

    def allowed_recipient(self, recipient: str) -> bool:
        fn = self.spender.functions.allowedRecipients(to_checksum_address(recipient))
        return bool(self._read(fn.call))

    def allowance(self, owner: str) -> int:
        fn = self.token.functions.allowance(to_checksum_address(owner), self.spender.address)
        return int(self._read(fn.call))

    def permit_nonce(self, owner: str) -> int:
        return int(self._read(self.token.functions.nonces(to_checksum_address(owner)).call))

    def usdc_balance(self, owner: str) -> int:
        fn = self.token.functions.balanceOf(to_checksum_address(owner))
        return int(self._read(fn.call))

    def owner(self) -> str:
        """The spender's owner: the one key its owner transactions take."""
        return str(self._read(self.spender.functions.owner().call))

    def pending_owner(self) -> str | None:
        """The spender's ``pendingOwner()`` (Ownable2Step): the zero address while no handover
        is pending. None for a spender that has no such function (one deployed as plain
        ``Ownable``): the call reverts there, as a call to any unknown function does."""
        call = self.spender.functions.pendingOwner().call

        def read() -> str | None:
            try:
                return str(call())
            except self.reverts:
                return None
        return self._read(read)

    def is_relayer(self, address: str) -> bool:
        fn = self.spender.functions.relayers(to_checksum_address(address))
        return bool(self._read(fn.call))

    def gas_balance(self, address: str) -> int:
        """Wei of the chain's own currency at ``address``: what its transactions' gas costs."""
        return int(self._read(lambda: self._w3.eth.get_balance(to_checksum_address(address))))

    def code_size(self, address: str) -> int:
        """Bytes of code at ``address``: 0 for an account a key controls (or nobody's)."""
        return len(self._read(lambda: self._w3.eth.get_code(to_checksum_address(address))))

    def readiness_of(self, relayer: str | None = None, *,
                     named: str | None = None) -> Readiness:
        """The reads every process needs (chain id, the spender's code and token); with a
        ``relayer`` address, also what its signing needs: a relayer of the spender, gas
        money, the base fee under the cap. None of it needs a key. ``named``: how the
        problems name the relayer (default: its address)."""
        try:
            return self._read(lambda: self._readiness(relayer, named or relayer))
        except ChainUnavailable as exc:
            return Readiness("down", {"detail": str(exc)})

    def _readiness(self, relayer: str | None, named: str | None) -> Readiness:
        detail: dict[str, Any] = {
            "chainId": self._w3.eth.chain_id, "block": self._w3.eth.block_number,
            "spender": self.spender.address, "token": self.token.address,
            "simulated": self._params.simulated}
        problems = []
        if detail["chainId"] != self._params.chain_id:
            problems.append("chain id differs from settings")
        deployed = bool(self._w3.eth.get_code(self.spender.address))
        if not deployed:
            problems.append("no contract at the spender address")
        elif self.spender.functions.token().call() != self.token.address:
            problems.append("the spender's token differs from settings")
        if relayer is not None:
            problems += self._sending_problems(detail, deployed, relayer, named or relayer)
        if problems:
            detail["problems"] = problems
        return Readiness("down" if problems else "ok", detail)

    def _sending_problems(self, detail: dict[str, Any], deployed: bool, relayer: str,
                          named: str) -> list[str]:
        problems = []
        address = to_checksum_address(relayer)
        detail["relayer"] = address
        if deployed and not self.spender.functions.relayers(address).call():
            problems.append(f"{named} is not a relayer of the spender")
        balance = self._w3.eth.get_balance(address)
        detail["relayerBalanceWei"] = str(balance)
        if balance == 0:
            problems.append(f"{named} has no gas money")
        base = latest_base_fee(self._w3)
        detail["baseFeePerGasWei"] = str(base)
        detail["maxFeePerGasWei"] = None if self._fee_cap is None else str(self._fee_cap)
        if self._fee_cap is not None:
            try:
                refuse_above_cap(base, self._fee_cap)
            except FeeAboveCap:
                problems.append("the base fee is above the fee cap "
                                "(SVCSRV_CHAIN_MAX_FEE_PER_GAS): nothing is signed until it falls")
        return problems

    # -- internals -----------------------------------------------------------------------

    def _simulate_and_sign(self, account: LocalAccount, fn: ContractFunction, gas: int,
                           nonce: Callable[[], int]) -> SignedTx:
        """``nonce`` is asked for only once the simulation passed and the fees are known:
        a relayer's allocated nonce must not be spent on a transaction never sent."""
        assert fn.address is not None
        data = fn._encode_transaction_data()
        call: TxParams = {"from": account.address, "to": fn.address, "data": data, "gas": gas}
        with self._lock:
            try:
                self._w3.eth.call(call, "latest")
            except self.reverts as exc:
                raise ChainRevert(revert_info(exc)) from None
            except Exception as exc:
                if "revert" in str(exc).lower():
                    raise ChainRevert(revert_info(exc)) from None
                raise unavailable(exc) from None
            max_fee, priority = self._fees()
        number = nonce()
        tx: dict[str, Any] = {
            "type": 2, "chainId": self._params.chain_id, "nonce": number, "to": fn.address,
            "data": data, "value": 0, "gas": gas, "maxFeePerGas": max_fee,
            "maxPriorityFeePerGas": priority}
        signed = account.sign_transaction(tx)
        return SignedTx(sender=str(account.address), nonce=number,
                        tx_hash=hex32(signed.hash), raw=hex32(signed.raw_transaction))

    def _fees(self) -> tuple[int, int]:
        return suggested_fees(self._w3, self._fee_cap)

    def _base_fee(self) -> int:
        return latest_base_fee(self._w3)

    def _read(self, fn: Callable[[], T]) -> T:
        with self._lock:
            try:
                return fn()
            except (ChainRevert, ChainUnavailable):
                raise
            except Exception as exc:
                raise unavailable(exc) from None

    def _charge_log(self, log: LogReceipt) -> ChargeSettledLog | None:
        if log["address"] != self.spender.address:
            return None
        try:
            event = self.spender.events.ChargeSettled().process_log(log)
        except MismatchedABI:
            return None
        return self._settled(event)

    def _transfer_log(self, log: LogReceipt) -> TransferLog | None:
        try:  # any emitter: reconciliation checks that it was our token
            event = self.token.events.Transfer().process_log(log)
        except MismatchedABI:
            return None
        args = event["args"]
        return TransferLog(token=to_checksum_address(log["address"]), sender=args["from"],
                           recipient=args["to"], amount=int(args["value"]))

    @staticmethod
    def _settled(event: Any) -> ChargeSettledLog:
        args = event["args"]
        return ChargeSettledLog(
            charge_id=bytes(args["chargeId"]), owner=args["owner"], recipient=args["recipient"],
            amount=int(args["amount"]), tx_hash=hex32(bytes(event["transactionHash"])),
            block_number=int(event["blockNumber"]), log_index=int(event["logIndex"]))
