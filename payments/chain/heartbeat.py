"""The chain worker's heartbeat: each ``svc-ops chain run`` cycle writes one row of
``chain_cursors`` for its relayer, and the servers' ``/statusz`` reports its age.

A row of the existing cursor table, not a table of its own (no migration): ``name`` is
``heartbeat:`` and the relayer address's first 30 hex digits (the column holds 40
characters; 120 bits tell keys apart), ``position`` the checksummed address, ``block`` the
cycles that process has run since it started (back to 1 after a restart), ``updated_at``
the end of its last cycle. One row per relayer key, as there is one worker per key
(docs/chain.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.chain.cursors import locked_cursor
from payments.chain.models import ChainCursor
from payments.db import transaction

PREFIX = "heartbeat:"
# A cycle waits for a permit relay's and a batch's receipts, up to the default receipt
# timeout (120 s, payments/chain/batching.py) each: a live worker may be that long between
# two beats without anything being wrong.
LONGEST_CYCLE = timedelta(seconds=240)
STALE_CYCLES = 3  # intervals beyond the longest cycle before a worker counts as gone


@dataclass(frozen=True)
class Heartbeat:
    relayer: str
    cycles: int
    at: datetime

    def age(self, now: datetime) -> float:
        return max(0.0, (now - self.at).total_seconds())


def row_name(relayer: str) -> str:
    return PREFIX + relayer.lower().removeprefix("0x")[:30]


def beat(sessions: sessionmaker[Session], relayer: str, cycles: int, now: datetime) -> None:
    with transaction(sessions) as session:
        row = locked_cursor(session, row_name(relayer), now)
        row.position, row.block, row.updated_at = relayer, cycles, now


def heartbeats(session: Session) -> list[Heartbeat]:
    """Every relayer's last beat, the newest first."""
    rows = session.scalars(select(ChainCursor).where(ChainCursor.name.startswith(PREFIX))
                           .order_by(ChainCursor.updated_at.desc()))
    return [Heartbeat(row.position or "", row.block, row.updated_at) for row in rows]


def stale_after(interval: float) -> timedelta:
    return LONGEST_CYCLE + STALE_CYCLES * timedelta(seconds=interval)
