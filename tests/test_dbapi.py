"""payments.dbapi: Core statements run on the driver's cursor read and write exactly what
the ORM reads and writes, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

import pytest
from sqlalchemy import Table, bindparam, event, insert, inspect, select, update
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction
from payments.dbapi import Compiled
from payments.ledger.models import IdempotencyRecord, WebhookAttempt
from payments.models import AllowlistStatus, App, AppStatus
from tests.factories import add_app

_APP = Compiled(select(App).where(App.slug == bindparam("slug")))
_RECORDS = cast(Table, IdempotencyRecord.__table__)
_ATTEMPTS = cast(Table, WebhookAttempt.__table__)


def test_a_row_reads_as_the_orm_reads_it(sessions: sessionmaker[Session]) -> None:
    checked = datetime(2026, 11, 23, 12, 30, 15, 123456, tzinfo=UTC)
    add_app(sessions, "reader", "https://reader.example", pay_to="0x" + "ab" * 20,
            recipient_allowlist_status=AllowlistStatus.ALLOWED, tags=["a", "b"],
            runtime_checked_at=checked, kill_switch=True)
    with transaction(sessions) as session:
        fast = _APP.entity(session, App, {"slug": "reader"})
        orm = session.scalars(select(App).where(App.slug == "reader")).one()
        assert fast is not None and fast is not orm
        for column in inspect(App).columns:
            assert getattr(fast, column.key) == getattr(orm, column.key), column.key
        # Types as the ORM gives them: enums, aware UTC datetimes, JSON, booleans.
        assert fast.status is AppStatus.ACTIVE
        assert fast.recipient_allowlist_status is AllowlistStatus.ALLOWED
        assert fast.runtime_checked_at == checked and fast.runtime_checked_at.tzinfo is not None
        assert fast.tags == ["a", "b"] and fast.kill_switch is True
        assert _APP.entity(session, App, {"slug": "nobody"}) is None


def test_a_detached_row_changes_nothing(sessions: sessionmaker[Session]) -> None:
    add_app(sessions, "detached", "https://detached.example")
    with transaction(sessions) as session:
        fast = _APP.entity(session, App, {"slug": "detached"})
        assert fast is not None
        fast.name = "Changed"
        session.flush()
        assert fast not in session
    with transaction(sessions) as session:
        assert session.scalars(select(App.name).where(App.slug == "detached")).one() == \
            "Detached"


def test_writes_in_the_session_transaction_and_rolls_back_with_it(
        sessions: sessionmaker[Session]) -> None:
    app = add_app(sessions, "writer")
    now = datetime(2026, 11, 23, tzinfo=UTC)
    values = {"app_id": app.id, "scope": "pay", "key": "k1", "request_hash": "h" * 64,
              "response_status": 201, "response_body": {"n": 1, "s": "x"},
              "created_at": now, "expires_at": now + timedelta(days=1)}
    write = Compiled.insert(_RECORDS, insert(_RECORDS))
    session = sessions()
    session.begin()
    write.run(session, values)
    session.rollback()
    session.close()
    with transaction(sessions) as session:
        assert session.scalars(select(IdempotencyRecord)).all() == []
        write.run(session, values)
    with transaction(sessions) as session:
        record = session.scalars(select(IdempotencyRecord)).one()
        assert (record.key, record.response_body, record.expires_at) == \
            ("k1", {"n": 1, "s": "x"}, now + timedelta(days=1))


def test_an_insert_missing_a_computed_default_fails_loudly(
        sessions: sessionmaker[Session]) -> None:
    """Nullable columns without a default are written as NULL; a column whose default is
    computed (an id, a timestamp) must be given, never silently skipped."""
    write = Compiled.insert(_ATTEMPTS, insert(_ATTEMPTS))
    with pytest.raises(KeyError, match="updated_at"), transaction(sessions) as session:
        write.run(session, {"id": "zwha_x", "event_id": "zevt_x", "status": "pending",
                            "attempt_count": 0, "next_attempt_at": datetime.now(UTC),
                            "signed": False})


def test_returning_and_literal_parameters(sessions: sessionmaker[Session]) -> None:
    add_app(sessions, "counted", kill_switch=False)
    flip = Compiled(update(App).where(App.slug == bindparam("slug"),
                                      App.status == AppStatus.ACTIVE)
                    .values(kill_switch=True).returning(App.kill_switch, App.status))
    now = datetime.now(UTC)
    with transaction(sessions) as session:
        with pytest.raises(KeyError, match="updated_at"):  # its onupdate is computed
            flip.first(session, {"slug": "counted"})
        assert flip.first(session, {"slug": "counted", "updated_at": now}) == \
            (True, AppStatus.ACTIVE)
        assert flip.first(session, {"slug": "nobody", "updated_at": now}) is None
    with transaction(sessions) as session:
        app = session.scalars(select(App).where(App.slug == "counted")).one()
        assert app.kill_switch is True and app.updated_at == now


def test_engine_listeners_see_the_statement(sessions: sessionmaker[Session]) -> None:
    """after_execute listeners (the webhook wakeup watches for outbox INSERTs) are told of
    every statement run here, with the Core statement itself."""
    app = add_app(sessions, "listened")
    seen: list[object] = []

    def listener(conn: object, clause: object, *_: object) -> None:
        seen.append(clause)
    engine = sessions.kw["bind"]
    event.listen(engine, "after_execute", listener)
    try:
        now = datetime.now(UTC)
        statement = insert(_RECORDS)
        with transaction(sessions) as session:
            Compiled.insert(_RECORDS, statement).run(session, {
                "app_id": app.id, "scope": "pay", "key": "k", "request_hash": "h" * 64,
                "response_status": 201, "response_body": {}, "created_at": now,
                "expires_at": now})
    finally:
        event.remove(engine, "after_execute", listener)
    assert statement in seen
