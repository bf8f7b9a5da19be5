"""The chain as the rest of the service sees it: small Protocols and plain data.

:class:`ChainReads` is what a server's requests read, with no key; :class:`ChainGateway` is
those reads plus the relayer's key, for the chain workers.

Two real implementations sit side by side: :mod:`payments.chain.in_process` (eth-tester +
py-evm, the embedded default) and :mod:`payments.chain.json_rpc` (a node over HTTP). Both
sign transactions locally, so a transaction's hash and nonce are known, and written down,
before it is broadcast; that is what makes the workers crash-safe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

# Annotations only: eth-abi and eth-utils take a tenth of a second to import, and every
# `svc-ops` command imports this module for ChainError (ops/dispatch.py).
if TYPE_CHECKING:
    from payments.chain.contracts import RevertInfo
    from payments.chain.params import ChainParams

# The widest block range asked of eth_getLogs at once: providers refuse wider ones (their
# caps vary, hence SVCSRV_CHAIN_LOG_BLOCKS).
MAX_LOG_BLOCKS = 5_000


class ChainError(Exception):
    """Something on the chain side went wrong; the message never carries a key."""


class ChainUnavailable(ChainError):
    """The node could not be reached or answered nonsense; try again later."""


class FeeAboveCap(ChainUnavailable):
    """The chain's base fee is above the operator's cap (``SVCSRV_CHAIN_MAX_FEE_PER_GAS``):
    nothing is signed until it falls, so nothing waits in a pool holding a nonce."""


class NonceTaken(ChainError):
    """The node refused a transaction because another one holds its nonce (pending in the
    pool, or mined): this one was not accepted and, as signed, never will be."""


class ChainRevert(ChainError):
    """A call or transaction reverted; ``info`` is the decoded error, whatever the backend."""

    def __init__(self, info: RevertInfo) -> None:
        super().__init__(describe_revert(info))
        self.info = info


def describe_revert(info: RevertInfo) -> str:
    """A short operator-readable reason, e.g. ``PairTransferFailed/ERC20InsufficientAllowance``."""
    return info.name if info.inner is None else f"{info.name}/{describe_revert(info.inner)}"


@dataclass(frozen=True)
class ChargeItem:
    charge_id: bytes  # bytes32
    amount: int


@dataclass(frozen=True)
class PairPlan:
    """The charges one owner pays one recipient in a batch (one ``transferFrom``)."""

    owner: str  # checksummed
    recipient: str  # checksummed
    charges: tuple[ChargeItem, ...]

    def abi_value(self) -> tuple[str, str, list[tuple[bytes, int]]]:
        return (self.owner, self.recipient, [(c.charge_id, c.amount) for c in self.charges])


@dataclass(frozen=True)
class SignedTx:
    """A transaction signed by the relayer but not necessarily broadcast yet."""

    sender: str
    nonce: int
    tx_hash: str  # 0x-prefixed, lower-case
    raw: str  # 0x-prefixed hex of the signed transaction


@dataclass(frozen=True)
class ChargeSettledLog:
    charge_id: bytes
    owner: str  # checksummed
    recipient: str  # checksummed
    amount: int
    tx_hash: str
    block_number: int
    log_index: int


@dataclass(frozen=True)
class TransferLog:
    token: str  # the emitting contract, checksummed
    sender: str
    recipient: str
    amount: int


@dataclass(frozen=True)
class Receipt:
    tx_hash: str
    status: int  # 1 success, 0 reverted
    block_number: int
    confirmations: int
    gas_used: int
    charges: tuple[ChargeSettledLog, ...] = ()
    transfers: tuple[TransferLog, ...] = ()

    @property
    def succeeded(self) -> bool:
        return self.status == 1


@dataclass(frozen=True)
class Readiness:
    status: str  # "ok" | "down"
    detail: Mapping[str, Any] = field(default_factory=dict)


class ChainReads(Protocol):
    """What a server's requests ask of the chain: reads that need no key. A server holds
    only this (``router/resources.py``), whatever its settings: what signs is a
    :class:`ChainGateway`, which only the chain workers get."""

    def allowed_recipient(self, recipient: str) -> bool: ...

    def permit_nonce(self, owner: str) -> int: ...

    def usdc_balance(self, owner: str) -> int:
        """The token balance the portal and the wallet card show (never as the budget)."""
        ...

    def readiness_of(self, relayer: str | None = None, *,
                     named: str | None = None) -> Readiness:
        """The chain's reads (chain id, the spender's code and token); with a ``relayer``
        address, also what its signing needs. ``named``: how problems name the relayer."""
        ...


class ChainGateway(ChainReads, Protocol):
    """What the relayer, the settlement worker and reconciliation need from a chain: the
    reads, and the relayer's key to sign with."""

    @property
    def params(self) -> ChainParams: ...

    @property
    def relayer(self) -> str:
        """The checksummed address that signs relays and batches."""
        ...

    @property
    def confirmations(self) -> int:
        """Confirmations a receipt needs before its outcome is final."""
        ...

    # Transactions: sign first (hash and nonce known), broadcast second.
    def check_fees(self) -> None:
        """Raises :class:`FeeAboveCap` while the base fee is above the operator's cap (then
        every signing would too); nothing to ask without a cap."""
        ...

    def sign_relay_permit(self, owner: str, value: int, deadline: int,
                          signature: bytes) -> SignedTx:
        """Simulates ``relayPermit`` (raising :class:`ChainRevert`), then signs it."""
        ...

    def sign_charge_batch(self, pairs: Sequence[PairPlan]) -> SignedTx:
        """Simulates ``chargeBatch`` (raising :class:`ChainRevert`), then signs it."""
        ...

    def broadcast(self, tx: SignedTx) -> None:
        """Sends a signed transaction; a copy the node already knows (pooled or mined) is not
        an error. Raises :class:`NonceTaken` when another transaction holds its nonce."""
        ...

    def replacement(self, tx: SignedTx) -> SignedTx | None:
        """``tx`` (same nonce, call and gas) signed again with fees the chain asks now and at
        least an eighth above its own, so a node replaces it in its pool; None while its own
        fees are still those a new transaction would get, or when that bump would go past
        the operator's cap."""
        ...

    def receipt(self, tx_hash: str) -> Receipt | None: ...

    def wait_receipt(self, tx_hash: str, timeout: float) -> Receipt | None:
        """The receipt once it has enough confirmations, or None after ``timeout``."""
        ...

    def revert_reason(self, tx_hash: str) -> RevertInfo:
        """Why a mined transaction reverted (replayed as a call)."""
        ...

    def mined_nonce(self, address: str) -> int:
        """How many of ``address``'s transactions are in confirmed blocks."""
        ...

    def release_nonces(self) -> None:
        """Forget locally allocated nonces (after an error) and re-read them from the chain."""
        ...

    # Reads beyond a server's.
    def block_number(self) -> int: ...

    def is_settled(self, charge_id: bytes) -> bool: ...

    def charge_settled_logs(self, from_block: int, to_block: int,
                            charge_id: bytes | None = None) -> list[ChargeSettledLog]: ...

    def allowance(self, owner: str) -> int: ...
