"""Portal tables: browser sessions opened by a wallet-ownership proof (spec 4.7 account page)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, String, text
from sqlalchemy.orm import Mapped, mapped_column

from payments.db import Base, UtcDateTime, time_column
from payments.ledger.models import SEQ


class WalletSession(Base):
    """A portal browser session that proved control of ``wallet`` with one gas-free signature.

    The cookie holds a random token; only its SHA-256 is stored. ``challenge_nonce`` is
    unique, so one signed challenge opens at most one session (a replayed proof is refused
    by the database, not by a check-then-insert).
    """

    __tablename__ = "portal_wallet_sessions"
    # The sweep's (proofs.dead_sessions): ended sessions by when they were opened, only the
    # ended ones (few: the sweep takes them five minutes on).
    __table_args__ = (Index("ix_portal_wallet_sessions_ended", "created_at",
                            sqlite_where=text("revoked_at IS NOT NULL"),
                            postgresql_where=text("revoked_at IS NOT NULL")),)
    id: Mapped[int] = mapped_column(SEQ, primary_key=True, autoincrement=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    challenge_nonce: Mapped[str] = mapped_column(String(64), unique=True)
    wallet: Mapped[str] = mapped_column(String(42), index=True)  # lower-case hex
    # Sent back in x-csrf-token by the account page's mutations (unlink, forget).
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = time_column()
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)  # the sweep's
    revoked_at: Mapped[datetime | None] = time_column(nullable=True)
