"""The sweep of dead wallet sessions (``proofs.dead_sessions``), on SQLite and PostgreSQL:
each run deletes at most a batch of expired sessions and a batch of ended ones whose
challenge has expired too; a live session, or an ended one whose challenge could still be
replayed, is never deleted. (The proofs that run it, over HTTP: test_portal_limits.py.)"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction, utcnow
from payments.portal.models import WalletSession
from payments.portal.proofs import CHALLENGE_TTL, SESSION_TTL, dead_sessions
from payments.sweeps import run_sweep

WALLET = "0x" + "3" * 40


def add_sessions(sessions: sessionmaker[Session],
                 *rows: tuple[str, datetime, datetime, datetime | None]) -> None:
    """(name, created_at, expires_at, revoked_at); the name is the challenge nonce."""
    with transaction(sessions) as session:
        for name, created, expires, revoked in rows:
            session.add(WalletSession(token_hash=name.ljust(64, "0"), challenge_nonce=name,
                                      wallet=WALLET, csrf_token="t", created_at=created,
                                      expires_at=expires, revoked_at=revoked))


def names(sessions: sessionmaker[Session]) -> list[str]:
    with sessions() as session:
        return list(session.scalars(select(WalletSession.challenge_nonce)
                                    .order_by(WalletSession.id)))


def test_a_sweep_deletes_a_batch_of_each_and_never_a_usable_row(
        sessions: sessionmaker[Session]) -> None:
    now = utcnow()
    opened = now - SESSION_TTL - timedelta(minutes=1)
    ended = now - CHALLENGE_TTL - timedelta(seconds=1)
    add_sessions(
        sessions,
        *[(f"expired{n}", opened, now - timedelta(seconds=n), None) for n in range(4)],
        *[(f"ended{n}", ended, now + SESSION_TTL, now - timedelta(minutes=1))
          for n in range(4)],
        ("live", now, now + SESSION_TTL, None),
        # Ended, but its challenge has not expired: the row refuses its replay.
        ("ended-recently", now - timedelta(minutes=1), now + SESSION_TTL, now),
        ("expires-later", opened, now + timedelta(seconds=1), None))

    def sweep() -> list[int]:
        with transaction(sessions) as session:  # one transaction per batch
            return [run_sweep(session, statement) for statement in dead_sessions(now, batch=3)]
    assert [sweep() for _ in range(3)] == [[3, 3], [1, 1], [0, 0]]
    assert names(sessions) == ["live", "ended-recently", "expires-later"]
