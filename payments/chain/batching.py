"""Pure decisions of settlement: grouping, gas, when to flush, retries, whom a revert blames."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from eth_utils.address import to_checksum_address

from payments.chain.contracts import RevertInfo, charge_id
from payments.chain.gateway import MAX_LOG_BLOCKS, ChargeItem, PairPlan, describe_revert
from payments.chain.journal import REPLACE_AFTER

# chargeBatch gas, set by us (py-evm's estimate replays a big batch for seconds). Generous
# worst cases: a pair may pay a cold allowance and a recipient's first balance (~70k); a
# charge is ~3-4k of event, bitmap and calldata, plus a fresh bitmap slot per 256 ids.
BATCH_BASE_GAS = 100_000
PAIR_GAS = 70_000
CHARGE_GAS = 8_000

# Reverts that say nothing about the charges (or a relayed permit): they are about our key,
# so the batch is released and the permit waits, neither failed.
NOT_THE_CHARGES = frozenset({"NotRelayer"})


@dataclass(frozen=True)
class BatchPolicy:
    max_charges: int = 100
    max_age: timedelta = timedelta(seconds=5)
    retry_limit: int = 6
    backoff: tuple[timedelta, ...] = (
        timedelta(minutes=1), timedelta(minutes=5), timedelta(minutes=30), timedelta(hours=2),
        timedelta(hours=6), timedelta(hours=12))
    receipt_timeout: float = 120.0
    # A batch's transaction still unmined after this long, when a new transaction would be
    # given a higher fee cap (the base fee rose), is signed again with higher fees.
    replace_after: timedelta = REPLACE_AFTER
    # A batch recorded without a transaction hash for this long lost its worker.
    unsent_grace: timedelta = timedelta(minutes=2)
    # The widest eth_getLogs range asked at once (looking for a charge's settlement log,
    # reconciling).
    log_blocks: int = MAX_LOG_BLOCKS

    @property
    def relay_hold(self) -> timedelta:
        """The longest a revoke, or a renewal lowering the allowance, waits for the charges
        accepted before it to have their settlement attempt (payments/chain/relay_hold.py).

        An attempt is flushed within ``max_age``, its transaction replaced with higher fees
        ``replace_after`` after it was sent if still unmined, and that replacement waited
        for ``receipt_timeout``: one not done by then is stuck (its fees, its worker gone),
        not slow. 5 s + 3 min + 2 min by default."""
        return self.max_age + self.replace_after + timedelta(seconds=self.receipt_timeout)


@dataclass(frozen=True)
class QueuedCharge:
    seq: int
    owner: str
    recipient: str
    amount: int


def plan_pairs(charges: Iterable[QueuedCharge]) -> tuple[PairPlan, ...]:
    """One pair per (owner, recipient), in order of first appearance; ids keep their order."""
    grouped: dict[tuple[str, str], list[ChargeItem]] = {}
    for charge in charges:
        key = (to_checksum_address(charge.owner), to_checksum_address(charge.recipient))
        grouped.setdefault(key, []).append(ChargeItem(charge_id(charge.seq), charge.amount))
    return tuple(PairPlan(owner, recipient, tuple(items))
                 for (owner, recipient), items in grouped.items())


def batch_gas_limit(pairs: Sequence[PairPlan]) -> int:
    charges = sum(len(pair.charges) for pair in pairs)
    return BATCH_BASE_GAS + PAIR_GAS * len(pairs) + CHARGE_GAS * charges


def should_flush(count: int, oldest: datetime | None, now: datetime,
                 policy: BatchPolicy) -> bool:
    """Flush when the batch is full or its oldest charge has waited long enough."""
    if count == 0 or oldest is None:
        return False
    return count >= policy.max_charges or now - oldest >= policy.max_age


def next_retry(attempts: int, now: datetime, policy: BatchPolicy) -> datetime | None:
    """When a charge that failed ``attempts`` times goes back to ``queued``; None: never."""
    if attempts >= policy.retry_limit:
        return None
    return now + policy.backoff[min(attempts, len(policy.backoff)) - 1]


@dataclass(frozen=True)
class Blame:
    """The charges a simulated revert names, and why; ``already_settled`` ones are not
    failures: the chain says they are settled, and their log is looked up."""

    seqs: frozenset[int]
    reason: str
    already_settled: bool = False


def blame(info: RevertInfo, pairs: Sequence[PairPlan]) -> Blame | None:
    """The charges to take out of a batch so the rest can settle; None if the revert names
    none (then the whole batch fails, or, for ``NOT_THE_CHARGES``, is released)."""
    reason = describe_revert(info)
    if info.name == "PairTransferFailed":
        index = int(info.args.get("pairIndex", -1))
        if 0 <= index < len(pairs):
            return Blame(_seqs(pairs[index].charges), reason)
    elif info.name == "RecipientNotAllowed":
        recipient = str(info.args.get("recipient", "")).lower()
        seqs = frozenset().union(*(_seqs(p.charges) for p in pairs
                                   if p.recipient.lower() == recipient))
        return Blame(seqs, reason) if seqs else None
    elif info.name == "ChargeAlreadySettled":
        raw = info.args.get("chargeId")
        if isinstance(raw, bytes):
            return Blame(frozenset({int.from_bytes(raw, "big")}), reason, already_settled=True)
    return None


def _seqs(items: Iterable[ChargeItem]) -> frozenset[int]:
    return frozenset(int.from_bytes(item.charge_id, "big") for item in items)
