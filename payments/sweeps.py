"""Deleting rows no request can use any more, a bounded batch at a time.

A sweep runs in the unit of work that adds a row of the same kind (a wallet proof opens a
session, a code is issued), so the table holds little more than its live rows without a
worker of its own. Each sweep deletes at most ``BATCH`` rows: a backlog (the first sweep
after an upgrade, a burst of rows that expired together) is worked off over many short
transactions, one batch each, never in one long one inside a person's request. The rows
are picked by an index on the sweep's condition (migration 0023), and on PostgreSQL with
``FOR UPDATE SKIP LOCKED``: two concurrent sweeps take different rows rather than one
waiting on the other's transaction (SQLite has one writer at a time and renders no lock
clause).
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import ColumnElement, CursorResult, Delete, delete, select
from sqlalchemy.orm import InstrumentedAttribute, Session

# Every sweep adds one row and may delete this many: enough to work off a backlog quickly,
# small enough that its delete stays a short part of the request it rides on.
BATCH = 100


def batch_delete(key: InstrumentedAttribute[Any], *where: ColumnElement[bool],
                 batch: int = BATCH) -> Delete:
    """``DELETE`` at most ``batch`` rows of ``key``'s table matching ``where``; ``key`` is
    the table's primary key. Nothing in the session holds the rows (no one can use them),
    so the session is not synchronized."""
    chosen = select(key).where(*where).limit(batch).with_for_update(skip_locked=True)
    return (delete(key.class_).where(key.in_(chosen))
            .execution_options(synchronize_session=False))


def run_sweep(session: Session, statement: Delete) -> int:
    """Run one batch; the number of rows it deleted."""
    return int(cast(CursorResult[Any], session.execute(statement)).rowcount or 0)
