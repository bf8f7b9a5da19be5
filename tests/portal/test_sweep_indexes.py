"""The sweeps of dead rows read their indexes (migration 0023): the planner, asked about each
sweep's own statement (``proofs.dead_sessions``, ``codes.expired_codes``), reads
``ix_portal_wallet_sessions_expires_at``, ``ix_portal_wallet_sessions_ended`` and
``ix_auth_codes_kind_expires_at`` on SQLite and on PostgreSQL, over tables of many live
rows and a few dead ones; without them (the schema of 0022) it reads every row."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Delete, Engine, inspect, text
from sqlalchemy.orm import Session, sessionmaker

from payments import migrate
from payments.db import make_engine, transaction, utcnow
from payments.ledger.codes import RETENTION, expired_codes
from payments.ledger.models import AuthCode, Authorization, CodeKind
from payments.portal.models import WalletSession
from payments.portal.proofs import SESSION_TTL, dead_sessions
from tests.factories import add_developer, add_owned_app
from tests.webhooks.test_attempt_index import explained

LIVE = 1500  # live rows of each kind
DEAD = 5
WALLET = "0x" + "1" * 40


def _fill(sessions: sessionmaker[Session], now: datetime) -> None:
    """Live sessions and codes, a few ended sessions and a few codes past retention."""
    _, organization_id = add_developer(sessions)
    app = add_owned_app(sessions, organization_id, "game")
    with transaction(sessions) as session:
        budget = Authorization(owner_wallet=WALLET, spender=WALLET, token=WALLET, chain_id=1,
                               value_atomic=10**12, deadline=now + timedelta(days=1), nonce=1,
                               signature="0x", created_at=now)
        session.add(budget)
        session.flush()
        for n in range(LIVE + DEAD):
            dead = n >= LIVE
            session.add(WalletSession(
                token_hash=f"{n:064x}", challenge_nonce=f"{n:064x}", wallet=WALLET,
                csrf_token="t", created_at=now - timedelta(minutes=10 if dead else 0),
                expires_at=now + SESSION_TTL, revoked_at=now if dead else None))
            for kind in CodeKind:
                expires = (now - RETENTION[kind] - timedelta(minutes=1) if dead
                           else now + timedelta(minutes=5))
                session.add(AuthCode(kind=kind, code_hash=f"{kind.value[0]}{n:063x}",
                                     authorization_id=budget.id, app_id=app.id,
                                     audience="https://game.example", created_at=now,
                                     expires_at=expires))


def _plan(engine: Engine, statement: Delete) -> str:
    with engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    with engine.connect() as conn, explained(engine) as lines:
        conn.execute(statement)
    return "\n".join(lines)


def _sweeps(now: datetime) -> dict[str, tuple[str, Delete]]:
    expired, ended = dead_sessions(now)
    return {
        "ix_portal_wallet_sessions_expires_at": ("portal_wallet_sessions", expired),
        "ix_portal_wallet_sessions_ended": ("portal_wallet_sessions", ended),
        "ix_auth_codes_kind_expires_at": ("auth_codes", expired_codes(CodeKind.PAYMENT, now)),
        "ix_auth_codes_kind_expires_at ": ("auth_codes", expired_codes(CodeKind.SUMMARY, now)),
    }


def test_every_sweep_reads_its_index(sessions: sessionmaker[Session], db_url: str) -> None:
    now = utcnow()
    _fill(sessions, now)
    engine = make_engine(db_url)
    try:
        for index, (table, statement) in _sweeps(now).items():
            plan = _plan(engine, statement)
            # SQLite: SEARCH ... USING INDEX; PostgreSQL: (Bitmap) Index Scan using ...
            assert index.strip() in plan, plan
            assert f"SCAN {table}\n" not in plan + "\n" and "Seq Scan" not in plan, plan
        migrate.downgrade(engine, "0022")  # the schema without them: every row is read
        for index, (table, statement) in _sweeps(now).items():
            plan = _plan(engine, statement)
            assert index.strip() not in plan, plan
            assert f"SCAN {table}" in plan or f"Seq Scan on {table}" in plan, plan
        migrate.upgrade(engine)
        assert all(index.strip() in _plan(engine, statement)
                   for index, (_, statement) in _sweeps(now).items())
    finally:
        engine.dispose()


def test_the_migration_adds_them_and_takes_them_back(db_url: str) -> None:
    engine = make_engine(db_url)

    def indexed(table: str) -> dict[str, list[str | None]]:
        return {i["name"] or "": i["column_names"] for i in inspect(engine).get_indexes(table)}
    try:
        assert indexed("portal_wallet_sessions")["ix_portal_wallet_sessions_expires_at"] == [
            "expires_at"]
        assert indexed("portal_wallet_sessions")["ix_portal_wallet_sessions_ended"] == [
            "created_at"]
        assert indexed("auth_codes")["ix_auth_codes_kind_expires_at"] == ["kind", "expires_at"]
        migrate.downgrade(engine, "0022")
        assert not {"ix_portal_wallet_sessions_expires_at", "ix_portal_wallet_sessions_ended"
                    } & set(indexed("portal_wallet_sessions"))
        assert "ix_auth_codes_kind_expires_at" not in indexed("auth_codes")
        migrate.upgrade(engine)
        assert "ix_auth_codes_kind_expires_at" in indexed("auth_codes")
        assert "ix_portal_wallet_sessions_ended" in indexed("portal_wallet_sessions")
    finally:
        engine.dispose()
