"""Rows of ``chain_cursors``: where a periodic job stopped, shared by every chain worker."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from payments.chain.models import ChainCursor


def locked_cursor(session: Session, name: str, now: datetime) -> ChainCursor:
    """The cursor ``name``, locked for the caller's transaction; created (``block`` 0, no
    position) on a job's first run. Workers on PostgreSQL run the same job at once: when
    another one creates the row first, its row is the one returned, and the caller's
    transaction goes on (a savepoint holds the refused insert)."""
    row = session.get(ChainCursor, name, with_for_update=True)
    if row is not None:
        return row
    try:
        with session.begin_nested():
            row = ChainCursor(name=name, block=0, updated_at=now)
            session.add(row)
    except IntegrityError:
        row = session.get(ChainCursor, name, with_for_update=True, populate_existing=True)
        assert row is not None  # the row that refused ours
    return row
