"""Waking the dispatcher right after a transaction that wrote an outbox row commits.

The ledger writes attempts with plain INSERTs inside its own units of work and knows
nothing of dispatchers. An engine hook notes, per thread, that a statement inserted into
``webhook_attempts`` (or carried the ``WAKE`` execution option, as a manual retry's UPDATE
does); the sessionmaker's ``after_commit`` hook then calls ``wake`` (and a rollback forgets
the note). The dispatcher's own UPDATEs wake nobody. Waking before the commit would let
the dispatcher look before the rows are visible; the poll interval stays the fallback
for everything else (other processes' commits, retries coming due).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, Insert, event, text
from sqlalchemy.orm import Session, sessionmaker

_TABLE = "webhook_attempts"
WAKE = {"svc_webhook_wake": True}  # execution option: wake the dispatcher after commit
CHANNEL = "svc_webhooks"  # PostgreSQL NOTIFY channel of dispatchers in other processes


class _OutboxWrites:
    """Notes, per thread, a transaction that wrote an outbox row (or carried ``WAKE``) and
    calls ``_fire`` at ``_COMMIT_EVENT``; a rollback forgets the note."""

    _COMMIT_EVENT = "after_commit"

    def __init__(self) -> None:
        self._pending = threading.local()

    def install(self, engine: Engine, sessions: sessionmaker[Session]) -> None:
        event.listen(engine, "after_execute", self._after_execute)
        event.listen(sessions, self._COMMIT_EVENT, self._committing)
        event.listen(sessions, "after_rollback", self._forget)

    def remove(self, engine: Engine, sessions: sessionmaker[Session]) -> None:
        event.remove(engine, "after_execute", self._after_execute)
        event.remove(sessions, self._COMMIT_EVENT, self._committing)
        event.remove(sessions, "after_rollback", self._forget)

    def _after_execute(self, conn: Any, clause: Any, multiparams: Any, params: Any,
                       options: Any, result: Any) -> None:
        if ((isinstance(clause, Insert) and getattr(clause.table, "name", None) == _TABLE)
                or options.get("svc_webhook_wake")):
            self._pending.flag = True

    def _committing(self, session: Session) -> None:
        if getattr(self._pending, "flag", False):
            self._pending.flag = False
            self._fire(session)

    def _forget(self, session: Session) -> None:
        self._pending.flag = False

    def _fire(self, session: Session) -> None:
        raise NotImplementedError


class CommitWakeup(_OutboxWrites):
    """Wakes this process's dispatcher once the rows are visible (after the commit)."""

    def __init__(self, wake: Callable[[], None]) -> None:
        super().__init__()
        self._wake = wake

    def _fire(self, session: Session) -> None:
        self._wake()


class NotifyOnCommit(_OutboxWrites):
    """PostgreSQL, for dispatchers in other processes (``svc-ops webhooks run``): a
    transaction that wrote an outbox row also says ``NOTIFY svc_webhooks``, which the server
    delivers to listeners when (and only if) the transaction commits. One statement more in
    such a transaction; docs/webhooks.md has the measurement."""

    _COMMIT_EVENT = "before_commit"  # NOTIFY must be part of the transaction it announces

    def _fire(self, session: Session) -> None:
        session.execute(text(f"NOTIFY {CHANNEL}"))
