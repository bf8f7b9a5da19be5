"""The webhook-attempts list reads a page of an app's events from the index
``ix_webhook_events_app_created`` (app_id, created_at, id), migration 0017, newest first:
the planner, asked about the list's own query (``operations.attempts_page``), walks the
index and sorts nothing, on the first page and on a cursor's page alike. Without the index
each page sorted every event of the app."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, event, inspect, text
from sqlalchemy.orm import Session, sessionmaker

from payments import migrate
from payments.db import make_engine, transaction, utcnow
from payments.ledger.models import AttemptStatus, WebhookAttempt, WebhookEvent
from payments.webhooks.attempt_cursor import AttemptCursor
from payments.webhooks.operations import AttemptFilter, attempts_page
from tests.factories import add_developer, add_owned_app

INDEX = "ix_webhook_events_app_created"
SLUGS = ("game", "other", "third", "fourth")
PER_APP = 400


def _fill(sessions: sessionmaker[Session]) -> str:
    """Four apps' events, a settlement batch's worth sharing each time; the first app's id."""
    _, organization_id = add_developer(sessions)
    apps = [add_owned_app(sessions, organization_id, slug).id for slug in SLUGS]
    start = utcnow() - timedelta(days=1)
    with transaction(sessions) as session:
        for app_id in apps:
            for n in range(PER_APP):
                made = WebhookEvent(app_id=app_id, type="payment.settled", payload={},
                                    created_at=start + timedelta(seconds=n // 4))
                session.add(made)
                session.flush()
                session.add(WebhookAttempt(event_id=made.id, status=AttemptStatus.DELIVERED,
                                           next_attempt_at=start))
    return apps[0]


@contextmanager
def explained(engine: Engine) -> Iterator[list[str]]:
    """Each SELECT run inside is explained instead, its plan's lines collected."""
    lines: list[str] = []
    sqlite = engine.dialect.name == "sqlite"

    def explain(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
                executemany: bool) -> tuple[str, Any]:
        return ("EXPLAIN QUERY PLAN " if sqlite else "EXPLAIN ") + statement, parameters

    def collect(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
                executemany: bool) -> None:
        lines.extend(str(row[-1]) for row in cursor.fetchall())

    event.listen(engine, "before_cursor_execute", explain, retval=True)
    event.listen(engine, "after_cursor_execute", collect)
    try:
        yield lines
    finally:
        event.remove(engine, "after_cursor_execute", collect)
        event.remove(engine, "before_cursor_execute", explain)


def _plan(engine: Engine, app_id: str, wanted: AttemptFilter) -> str:
    with engine.connect() as conn, explained(engine) as lines:
        conn.execute(attempts_page(app_id, wanted))
    return "\n".join(lines)


def test_the_index_is_there_and_the_list_reads_its_pages_from_it(
        sessions: sessionmaker[Session], db_url: str) -> None:
    app_id = _fill(sessions)
    engine = make_engine(db_url)
    try:
        indexes = {i["name"]: i["column_names"]
                   for i in inspect(engine).get_indexes("webhook_events")}
        assert indexes[INDEX] == ["app_id", "created_at", "id"]
        # Its first column serves every lookup by app the single-column index served.
        assert "ix_webhook_events_app_id" not in indexes
        with engine.begin() as conn:
            conn.execute(text("ANALYZE"))
        with sessions() as session:  # the last row of a first page of 200
            last = session.execute(attempts_page(app_id, AttemptFilter(limit=199))).all()[-1][1]
        cursor = AttemptCursor(last.created_at, last.id)
        for wanted in (AttemptFilter(), AttemptFilter(before=cursor),
                       AttemptFilter(status=AttemptStatus.DELIVERED, before=cursor)):
            plan = _plan(engine, app_id, wanted)
            assert INDEX in plan, plan
            assert "TEMP B-TREE" not in plan and "Sort" not in plan, plan  # nothing sorted
            if wanted.before is not None:  # the walk starts at the cursor: no filter over
                assert ("(created_at,id)<(?,?)" in plan  # every newer event of the app
                        or re.search(r"Index Cond: .*ROW\(created_at, \(?id", plan)), plan
    finally:
        engine.dispose()


def test_the_migration_adds_it_and_takes_it_back(db_url: str) -> None:
    engine = make_engine(db_url)

    def indexed() -> dict[str, list[str | None]]:
        return {i["name"] or "": i["column_names"]
                for i in inspect(engine).get_indexes("webhook_events")}
    try:
        migrate.downgrade(engine, "0016")
        assert INDEX not in indexed() and indexed()["ix_webhook_events_app_id"] == ["app_id"]
        migrate.upgrade(engine)
        assert indexed()[INDEX] == ["app_id", "created_at", "id"]
        assert "ix_webhook_events_app_id" not in indexed()
    finally:
        engine.dispose()

