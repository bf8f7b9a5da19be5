"""What became of a transaction we signed and wrote down: the crash-recovery decision.

Pure over the chain's answers (no database): a confirmed receipt decides; a nonce that
confirmed blocks show consumed without our receipt, or that the node says another transaction
holds, means it never will be mined; anything else is sent again, byte for byte (same nonce,
same hash), and given a moment to land.
"""

from __future__ import annotations

from dataclasses import dataclass

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


Outcome = Mined | Dropped | Waiting


def resolve(chain: ChainGateway, tx: SignedTx, wait: float) -> Outcome:
    receipt = chain.receipt(tx.tx_hash)
    if receipt is not None:
        return Mined(receipt) if receipt.confirmations >= chain.confirmations else Waiting()
    if chain.mined_nonce(tx.sender) > tx.nonce:
        # Our receipt may have landed between the two reads: look once more.
        late = chain.receipt(tx.tx_hash)
        if late is None:
            return Dropped()
        return Mined(late) if late.confirmations >= chain.confirmations else Waiting()
    try:
        chain.broadcast(tx)
    except NonceTaken:  # held by another transaction in the pool (or one mined since)
        return Dropped()
    except ChainUnavailable:
        return Waiting()
    found = chain.wait_receipt(tx.tx_hash, wait)
    return Waiting() if found is None else Mined(found)
