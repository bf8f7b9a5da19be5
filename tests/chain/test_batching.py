"""The pure decisions of settlement, without a chain or a database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from web3.exceptions import ContractLogicError

from payments.chain.batching import (
    BatchPolicy,
    QueuedCharge,
    batch_gas_limit,
    blame,
    next_retry,
    plan_pairs,
    should_flush,
)
from payments.chain.contracts import RevertInfo, charge_id, revert_info
from payments.chain.gateway import (
    ChainError,
    ChainUnavailable,
    FeeAboveCap,
    NonceTaken,
    Receipt,
    SignedTx,
)
from payments.chain.journal import Dropped, Mined, Waiting, resolve, resolve_replaced
from payments.chain.reader import capped_fees

A, B = "0x" + "aa" * 20, "0x" + "bb" * 20
R1, R2 = "0x" + "11" * 20, "0x" + "22" * 20
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_pairs_group_by_owner_and_recipient_in_first_seen_order() -> None:
    pairs = plan_pairs([QueuedCharge(1, A, R1, 5), QueuedCharge(2, B, R1, 6),
                        QueuedCharge(3, A, R1, 7), QueuedCharge(4, A, R2, 8)])
    assert [(p.owner.lower(), p.recipient.lower(), [c.amount for c in p.charges])
            for p in pairs] == [(A, R1, [5, 7]), (B, R1, [6]), (A, R2, [8])]
    assert pairs[0].charges[1].charge_id == charge_id(3)
    assert batch_gas_limit(pairs) == 100_000 + 3 * 70_000 + 4 * 8_000


def test_fees_offer_room_for_the_base_fee_to_double_up_to_the_cap() -> None:
    gwei = 10**9
    assert capped_fees(10 * gwei, gwei, None) == (21 * gwei, gwei)
    assert capped_fees(10 * gwei, gwei, 50 * gwei) == (21 * gwei, gwei)  # under the cap
    assert capped_fees(10 * gwei, gwei, 15 * gwei) == (15 * gwei, gwei)  # at most the cap
    assert capped_fees(10 * gwei, 8 * gwei, 10 * gwei) == (10 * gwei, 8 * gwei)
    assert capped_fees(0, 3 * gwei, gwei) == (gwei, gwei)  # the tip fits under the cap too
    with pytest.raises(FeeAboveCap, match="above the cap"):
        capped_fees(10 * gwei + 1, gwei, 10 * gwei)  # no block could take it: not signed


def test_flush_by_size_or_age() -> None:
    policy = BatchPolicy(max_charges=3, max_age=timedelta(seconds=5))
    assert not should_flush(0, None, NOW, policy)
    assert not should_flush(2, NOW - timedelta(seconds=4), NOW, policy)
    assert should_flush(3, NOW, NOW, policy)
    assert should_flush(1, NOW - timedelta(seconds=5), NOW, policy)


def test_retry_backoff_then_give_up() -> None:
    policy = BatchPolicy(retry_limit=3, backoff=(timedelta(minutes=1), timedelta(minutes=5)))
    assert next_retry(1, NOW, policy) == NOW + timedelta(minutes=1)
    assert next_retry(2, NOW, policy) == NOW + timedelta(minutes=5)
    assert next_retry(3, NOW, policy) is None


def test_blame_names_the_charges_a_revert_points_at() -> None:
    pairs = plan_pairs([QueuedCharge(1, A, R1, 5), QueuedCharge(2, B, R2, 6),
                        QueuedCharge(3, A, R2, 7)])
    inner = RevertInfo("ERC20InsufficientAllowance")
    transfer = blame(RevertInfo("PairTransferFailed", {"pairIndex": 1}, inner), pairs)
    assert transfer is not None and transfer.seqs == {2}
    assert transfer.reason == "PairTransferFailed/ERC20InsufficientAllowance"
    recipient = blame(RevertInfo("RecipientNotAllowed", {"recipient": R2.upper()}), pairs)
    assert recipient is not None and recipient.seqs == {2, 3}
    settled = blame(RevertInfo("ChargeAlreadySettled", {"chargeId": charge_id(3)}), pairs)
    assert settled is not None and settled.already_settled and settled.seqs == {3}
    assert blame(RevertInfo("NotRelayer", {"caller": A}), pairs) is None


def test_node_revert_data_inside_the_error_object_is_decoded() -> None:
    data = "0x" + bytes.fromhex("7f6ae7a5").hex() + "00" * 12 + "11" * 20  # a made-up error
    error = ContractLogicError("execution reverted", data={"message": "reverted", "data": data})
    assert revert_info(error).name == "UnknownError"
    panic = "0x4e487b71" + "00" * 31 + "11"
    error = ContractLogicError("execution reverted", data={"message": "x", "data": panic})
    assert (revert_info(error).name, revert_info(error).args) == ("Panic", {"code": 0x11})


class _Chain:
    """Just enough of a gateway for :func:`resolve`."""

    confirmations = 2

    def __init__(self, receipt: Receipt | None, mined: int,
                 refusal: ChainError | None = None) -> None:
        self._receipt, self._mined, self.sent = receipt, mined, 0
        self._refusal = refusal

    def receipt(self, tx_hash: str) -> Receipt | None:
        return self._receipt

    def mined_nonce(self, address: str) -> int:
        return self._mined

    def broadcast(self, tx: SignedTx) -> None:
        self.sent += 1
        if self._refusal is not None:
            raise self._refusal

    def wait_receipt(self, tx_hash: str, timeout: float) -> Receipt | None:
        return None


def test_resolution_of_a_recorded_transaction() -> None:
    tx = SignedTx(A, 7, "0x" + "01" * 32, "0x02")
    mined = Receipt(tx.tx_hash, 1, 10, 2, 50_000)
    assert isinstance(resolve(_Chain(mined, 8), tx, 0), Mined)  # type: ignore[arg-type]
    young = Receipt(tx.tx_hash, 1, 10, 1, 50_000)
    assert resolve(_Chain(young, 8), tx, 0) == Waiting(mined=True)  # type: ignore[arg-type]
    assert isinstance(resolve(_Chain(None, 8), tx, 0), Dropped)  # type: ignore[arg-type]
    unsent = _Chain(None, 7)
    assert isinstance(resolve(unsent, tx, 0), Waiting)  # type: ignore[arg-type]
    assert unsent.sent == 1  # the same bytes, sent again
    # The node holds another transaction under the nonce (its pool, not yet mined): ours
    # can never be mined. A node that cannot be reached decides nothing.
    taken = _Chain(None, 7, NonceTaken("nonce 7 is held by another transaction"))
    assert isinstance(resolve(taken, tx, 0), Dropped)  # type: ignore[arg-type]
    down = _Chain(None, 7, ChainUnavailable("timeout"))
    assert isinstance(resolve(down, tx, 0), Waiting)  # type: ignore[arg-type]


class _Pool(_Chain):
    """Receipts by hash, for a nonce signed more than once."""

    def __init__(self, receipts: dict[str, Receipt], mined: int,
                 refusal: ChainError | None = None) -> None:
        super().__init__(None, mined, refusal)
        self._receipts = receipts
        self.sent_hashes: list[str] = []

    def receipt(self, tx_hash: str) -> Receipt | None:
        return self._receipts.get(tx_hash)

    def broadcast(self, tx: SignedTx) -> None:
        self.sent_hashes.append(tx.tx_hash)
        super().broadcast(tx)


def test_resolution_of_a_replaced_transaction() -> None:
    first = SignedTx(A, 7, "0x" + "01" * 32, "0x02")
    second = SignedTx(A, 7, "0x" + "03" * 32, "0x04")
    both = [first, second]
    mined_first = Receipt(first.tx_hash, 1, 10, 2, 50_000)
    outcome = resolve_replaced(_Pool({first.tx_hash: mined_first}, 8), both, 0)  # type: ignore[arg-type]
    assert isinstance(outcome, Mined) and outcome.receipt.tx_hash == first.tx_hash
    assert isinstance(resolve_replaced(_Pool({}, 8), both, 0), Dropped)  # type: ignore[arg-type]
    pending = _Pool({}, 7)
    assert resolve_replaced(pending, both, 0) == Waiting(mined=False)  # type: ignore[arg-type]
    young = Receipt(first.tx_hash, 1, 10, 1, 50_000)  # mined, not yet confirmed: no replacing
    confirming = _Pool({first.tx_hash: young}, 7)
    assert resolve_replaced(confirming, both, 0) == Waiting(mined=True)  # type: ignore[arg-type]
    assert pending.sent_hashes == [second.tx_hash]  # the newest is the one sent again
    # The node says another transaction holds the nonce: it may be our older one, so only a
    # mined nonce decides.
    held = _Pool({}, 7, NonceTaken("nonce 7 is held by another transaction"))
    assert isinstance(resolve_replaced(held, both, 0), Waiting)  # type: ignore[arg-type]
