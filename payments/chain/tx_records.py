"""Our chain transactions' rows: each written down, pending, before it is sent, and its
outcome after. Shared by the settlement worker (``chargeBatch``) and the relayer (permits),
which sign from the same key's nonces; :mod:`payments.chain.journal` decides from the chain
what became of one, and these write that down.
"""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from payments.chain.gateway import SignedTx
from payments.chain.models import ChainTransaction, TxKind, TxStatus

log = logging.getLogger(__name__)


def record_signed(session: Session, signed: SignedTx, now: datetime, kind: TxKind, *,
                  batch_id: str | None = None, authorization_id: str | None = None) -> bool:
    """Write ``signed`` down, pending, before it is sent: one row per hash.

    Signing again after a drop gives the very bytes of the dropped transaction when the node
    reports the same nonce and the fees have not moved (a lagging node, a quiet chain): that
    row is pending again, now for ``batch_id``/``authorization_id``, and the same bytes are
    sent again (they are what the nonce is free for, if it is). Bytes recorded as mined or
    refused are not sent as new: False, and nothing is written."""
    row = session.scalar(select(ChainTransaction).where(
        ChainTransaction.tx_hash == signed.tx_hash).with_for_update())
    if row is None:
        session.add(ChainTransaction(
            kind=kind, status=TxStatus.PENDING, sender=signed.sender, nonce=signed.nonce,
            tx_hash=signed.tx_hash, raw=signed.raw, batch_id=batch_id,
            authorization_id=authorization_id, created_at=now))
        return True
    if row.status != TxStatus.DROPPED or row.kind != kind:
        log.warning("signed %s again, already recorded %s: not sent", signed.tx_hash,
                    row.status)
        return False
    log.warning("signed %s again after it was dropped (the node gave the same nonce): "
                "sent again, for %s instead of %s", signed.tx_hash, batch_id or authorization_id,
                row.batch_id or row.authorization_id)
    row.status, row.resolved_at, row.error, row.created_at = TxStatus.PENDING, None, None, now
    row.batch_id, row.authorization_id = batch_id, authorization_id
    return True


def batch_of(session: Session, tx_hash: str) -> str | None:
    """The batch our transaction ``tx_hash`` was sent for: its row's (one row per hash;
    a failed batch keeps the hash of bytes a later batch sent again, :func:`record_signed`)."""
    return session.scalar(select(ChainTransaction.batch_id).where(
        ChainTransaction.tx_hash == tx_hash))


def finish_tx(tx: ChainTransaction, status: TxStatus, block: int | None, error: str | None,
              now: datetime) -> None:
    """A mined transaction's outcome on its row: the block, and the decoded revert (as much
    as the column holds)."""
    tx.status, tx.block_number, tx.resolved_at = status, block, now
    tx.error = error[:300] if error else None


def drop_pending(session: Session, which: ColumnElement[bool], why: str,
                 now: datetime) -> None:
    """Mark ``which`` of the pending transactions dropped: their nonce went to another."""
    for tx in session.scalars(select(ChainTransaction).where(
            which, ChainTransaction.status == TxStatus.PENDING).with_for_update()):
        tx.status, tx.resolved_at, tx.error = TxStatus.DROPPED, now, why[:300]


def signed_tx(row: ChainTransaction) -> SignedTx:
    """The recorded transaction, as it can be sent again."""
    assert row.sender and row.nonce is not None and row.tx_hash and row.raw
    return SignedTx(row.sender, row.nonce, row.tx_hash, row.raw)
