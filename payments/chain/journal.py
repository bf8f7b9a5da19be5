"""What became of a transaction we signed and wrote down: the crash-recovery decision.

Pure over the chain's answers (no database): a confirmed receipt decides; a nonce that
confirmed blocks show consumed without our receipt, or that the node says another transaction
holds, means it never will be mined; anything else is sent again, byte for byte (same nonce,
same hash), and given a moment to land. A transaction replaced with higher fees is
resolved with its replacements: any of them mined decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from payments.chain.gateway import ChainGateway, ChainUnavailable, NonceTaken, Receipt, SignedTx


@dataclass(frozen=True)
class Mined:
    receipt: Receipt


@dataclass(frozen=True)
class Dropped:
    """The nonce went to another transaction: this one can never be mined."""


@dataclass(frozen=True)
class Waiting:
    """Not final yet (unconfirmed, or resent and not mined within the wait)."""

    mined: bool = False  # in a block, waiting for confirmations: never to be replaced


Outcome = Mined | Dropped | Waiting


def resolve_replaced(chain: ChainGateway, txs: Sequence[SignedTx], wait: float) -> Outcome:
    """:func:`resolve` for one nonce signed more than once (a transaction and its
    replacements with higher fees, oldest first): whichever is mined decides; the newest is
    the one sent again."""
    if len(txs) == 1:
        return resolve(chain, txs[0], wait)
    latest = txs[-1]
    mined = _any_receipt(chain, txs)
    if mined is not None:
        return mined
    if chain.mined_nonce(latest.sender) > latest.nonce:
        return _any_receipt(chain, txs) or Dropped()
    try:
        chain.broadcast(latest)
    except (NonceTaken, ChainUnavailable):
        # An older one of ours may be what holds the nonce in the node's pool: only a mined
        # nonce decides (above), never this answer.
        return Waiting()
    return _sent_again(chain, latest, wait)


def _any_receipt(chain: ChainGateway, txs: Sequence[SignedTx]) -> Outcome | None:
    for tx in txs:
        receipt = chain.receipt(tx.tx_hash)
        if receipt is not None:
            return _decided(chain, receipt)
    return None


def _decided(chain: ChainGateway, receipt: Receipt) -> Outcome:
    """A receipt decides once it has enough confirmations; until then it only waits."""
    return Mined(receipt) if receipt.confirmations >= chain.confirmations else Waiting(mined=True)


def resolve(chain: ChainGateway, tx: SignedTx, wait: float) -> Outcome:
    receipt = chain.receipt(tx.tx_hash)
    if receipt is not None:
        return _decided(chain, receipt)
    if chain.mined_nonce(tx.sender) > tx.nonce:
        # Our receipt may have landed between the two reads: look once more.
        late = chain.receipt(tx.tx_hash)
        if late is None:
            return Dropped()
        return _decided(chain, late)
    try:
        chain.broadcast(tx)
    except NonceTaken:  # held by another transaction in the pool (or one mined since)
        return Dropped()
    except ChainUnavailable:
        return Waiting()
    return _sent_again(chain, tx, wait)


def _sent_again(chain: ChainGateway, tx: SignedTx, wait: float) -> Outcome:
    found = chain.wait_receipt(tx.tx_hash, wait)
    if found is not None:
        return Mined(found)
    return Waiting(mined=chain.receipt(tx.tx_hash) is not None)


# A transaction unmined this long, with a higher fee cap due, is signed again.
REPLACE_AFTER = timedelta(minutes=3)


def replacement_due(outcome: Outcome, latest: SignedTx, recorded_at: datetime, relayer: str,
                    now: datetime, after: timedelta) -> bool:
    """Whether to sign ``latest`` again with higher fees (docs/chain.md, "Fees"): it is not
    in a block, it is our own key's (no other can sign it), and it has waited ``after``
    since it was recorded."""
    return (isinstance(outcome, Waiting) and not outcome.mined
            and latest.sender.lower() == relayer.lower() and now - recorded_at >= after)
