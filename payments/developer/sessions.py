"""Console sessions: server-side rows, looked up by the hash of a cookie token."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from payments.developer.models import ConsoleSession
from payments.developer.tokens import new_token, token_hash

# last_seen_at is written at most this often, so reading pages costs no write each time.
TOUCH_EVERY = timedelta(seconds=60)


@dataclass(frozen=True)
class SessionPolicy:
    idle: timedelta = timedelta(hours=2)
    absolute: timedelta = timedelta(hours=12)


@dataclass(frozen=True)
class OpenedSession:
    token: str  # goes into the cookie; only its hash is stored
    record: ConsoleSession


def open_session(session: Session, developer_id: str, now: datetime,
                 policy: SessionPolicy) -> OpenedSession:
    token = new_token()
    record = ConsoleSession(token_hash=token_hash(token), developer_id=developer_id,
                            csrf_token=secrets.token_urlsafe(32), created_at=now,
                            last_seen_at=now, expires_at=now + policy.absolute)
    session.add(record)
    session.flush()
    return OpenedSession(token, record)


def load_session(session: Session, token: str | None, now: datetime,
                 policy: SessionPolicy) -> ConsoleSession | None:
    """The live session for a cookie token: not revoked, not idle too long, not too old."""
    if not token:
        return None
    record = session.scalar(select(ConsoleSession)
                            .where(ConsoleSession.token_hash == token_hash(token)))
    if record is None or record.revoked_at is not None or record.expires_at <= now:
        return None
    if record.last_seen_at + policy.idle <= now:
        return None
    if now - record.last_seen_at >= TOUCH_EVERY:
        record.last_seen_at = now
    return record


def revoke_session(session: Session, token: str | None, now: datetime) -> None:
    if token:
        session.execute(update(ConsoleSession)
                        .where(ConsoleSession.token_hash == token_hash(token),
                               ConsoleSession.revoked_at.is_(None))
                        .values(revoked_at=now))


def revoke_all_sessions(session: Session, developer_id: str, now: datetime) -> None:
    session.execute(update(ConsoleSession)
                    .where(ConsoleSession.developer_id == developer_id,
                           ConsoleSession.revoked_at.is_(None))
                    .values(revoked_at=now))
