"""The :class:`~payments.chain.gateway.ChainGateway` over a ``web3.Web3``, whatever its provider.

Both real gateways are this class with a different provider: eth-tester in process, or a
node over HTTP. It is the :class:`~payments.chain.reader.ChainReader` plus the relayer's
key: transactions are EIP-1559, signed here with that key (never logged, never in
``repr``), simulated first so a revert is decoded before any gas is spent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_account.typed_transactions.typed_transaction import TypedTransaction
from eth_utils.address import to_checksum_address
from hexbytes import HexBytes
from web3 import Web3
from web3.contract.contract import ContractFunction

from payments.chain.batching import batch_gas_limit
from payments.chain.gateway import FeeAboveCap, PairPlan, SignedTx
from payments.chain.nonces import NonceAllocator
from payments.chain.params import ChainParams
from payments.chain.reader import ChainReader, hex32, refuse_above_cap

PERMIT_GAS = 150_000


class Web3Chain(ChainReader):
    def __init__(self, w3: Web3, params: ChainParams, relayer_key: bytes | str, *,
                 confirmations: int = 1, poll_interval: float = 0.5,
                 max_fee_per_gas: int | None = None) -> None:
        super().__init__(w3, params, confirmations=confirmations, poll_interval=poll_interval,
                         max_fee_per_gas=max_fee_per_gas)
        self._account: LocalAccount = Account.from_key(relayer_key)
        self._nonces = NonceAllocator(
            lambda: self._w3.eth.get_transaction_count(self._account.address, "pending"))

    def __repr__(self) -> str:  # the key stays out of every log line
        return f"{type(self).__name__}(chain_id={self._params.chain_id}, relayer={self.relayer})"

    @property
    def relayer(self) -> str:
        return str(self._account.address)

    # -- transactions -------------------------------------------------------------------

    def sign_relay_permit(self, owner: str, value: int, deadline: int,
                          signature: bytes) -> SignedTx:
        if len(signature) != 65:
            raise ValueError("a permit signature is 65 bytes")
        v = signature[64] + 27 if signature[64] < 27 else signature[64]
        fn = self.spender.functions.relayPermit(
            to_checksum_address(owner), value, deadline, v, signature[:32], signature[32:64])
        return self._sign(fn, PERMIT_GAS)

    def sign_charge_batch(self, pairs: Sequence[PairPlan]) -> SignedTx:
        fn = self.spender.functions.chargeBatch([pair.abi_value() for pair in pairs])
        return self._sign(fn, batch_gas_limit(pairs))

    def check_fees(self) -> None:
        if self._fee_cap is not None:  # the base fee alone decides: no tip asked
            refuse_above_cap(self._read(self._base_fee), self._fee_cap)

    def replacement(self, tx: SignedTx) -> SignedTx | None:
        old = TypedTransaction.from_bytes(HexBytes(tx.raw)).as_dict()
        if old.get("type") != 2 or tx.sender.lower() != self.relayer.lower():
            raise ValueError("only the relayer's own EIP-1559 transactions are replaced")
        try:
            max_fee, priority = self._read(self._fees)
        except FeeAboveCap:
            return None  # no fee we may offer gets it mined; it waits for the base fee
        if max_fee <= old["maxFeePerGas"]:
            return None
        # Nodes replace a pooled transaction only for a higher tip and fee cap, by 10% (geth)
        # or more: an eighth above the old, or what a new transaction would get if higher.
        least_priority = old["maxPriorityFeePerGas"] * 9 // 8 + 1
        least_fee = old["maxFeePerGas"] * 9 // 8 + 1
        priority = max(priority, least_priority)
        max_fee = max(max_fee, least_fee, priority)
        if self._fee_cap is not None and max_fee > self._fee_cap:
            max_fee = self._fee_cap
            priority = min(priority, max_fee)
            if max_fee < least_fee or priority < least_priority:
                return None  # a bump the node would take goes past the operator's cap
        fresh: dict[str, Any] = {
            "type": 2, "chainId": self._params.chain_id, "nonce": tx.nonce,
            "to": to_checksum_address(old["to"]), "data": old["data"], "value": old["value"],
            "gas": old["gas"], "maxFeePerGas": max_fee, "maxPriorityFeePerGas": priority}
        signed = self._account.sign_transaction(fresh)
        return SignedTx(sender=tx.sender, nonce=tx.nonce, tx_hash=hex32(signed.hash),
                        raw=hex32(signed.raw_transaction))

    def release_nonces(self) -> None:
        self._nonces.reset()

    def _sign(self, fn: ContractFunction, gas: int) -> SignedTx:
        return self._simulate_and_sign(self._account, fn, gas,
                                       lambda: self._read(self._nonces.allocate))
