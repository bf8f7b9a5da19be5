"""Migrations and the model on both backends."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from payments import migrate
from payments.apps import create_app_record
from payments.config.models import ConfigRevision
from payments.db import Base, make_engine, make_sessionmaker, transaction, utcnow
from payments.errors import ApiError
from payments.models import App, ListingStatus, PayToStatus
from payments.runtime.models import OperatorAction, OperatorActionKind
from tests.conftest import fresh_pg_database


def test_migrations_up_down_up_on_postgresql(pg_admin_url: str) -> None:
    engine = make_engine(fresh_pg_database(pg_admin_url, None))
    try:
        migrate.upgrade(engine)
        assert migrate.current_revision(engine) == migrate.head_revision(engine)
        assert {"apps", "products"} <= set(inspect(engine).get_table_names())
        migrate.downgrade(engine, "base")
        assert migrate.current_revision(engine) is None
        assert not {"apps", "products"} & set(inspect(engine).get_table_names())
        migrate.upgrade(engine)
        assert migrate.current_revision(engine) == migrate.head_revision(engine)
    finally:
        engine.dispose()


def test_models_match_migrations(db_url: str) -> None:
    """A model change without a migration fails here, on both backends."""
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(
                conn, opts={"compare_type": True}), Base.metadata)
        assert diff == []
    finally:
        engine.dispose()


def test_create_app_generates_slug_and_prefixed_id(sessions: sessionmaker[Session]) -> None:
    with transaction(sessions) as session:
        app = create_app_record(session, name="Space Blaster 2!")
        assert app.slug == "space-blaster-2"
        assert app.id.startswith("zapp_")
        assert app.pay_to_status is PayToStatus.UNBOUND
    with transaction(sessions) as session:
        with_pay_to = create_app_record(session, name="Tip Jar",
                                        pay_to="0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
        assert with_pay_to.pay_to_status is PayToStatus.TESTING
        assert with_pay_to.portal_listing_status is ListingStatus.PENDING_REVIEW
        assert app.portal_listing_status is ListingStatus.UNLISTED


def test_listing_review_migration(db_url: str) -> None:
    """0010: apps bound to a pay_to before the listing review existed enter its queue, and
    operator_actions accepts the listing decisions (downgrade drops them again)."""
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    try:
        with transaction(sessions) as session:
            session.add_all([
                App(name="Bound", slug="bound", pay_to="0x" + "ab" * 20,
                    portal_listing_status=ListingStatus.UNLISTED),
                App(name="Unbound", slug="unbound"),
                App(name="Listed", slug="listed", pay_to="0x" + "cd" * 20,
                    portal_listing_status=ListingStatus.LISTED)])
        migrate.downgrade(engine, "0009")
        migrate.upgrade(engine)
        with transaction(sessions) as session:
            statuses = {a.slug: a.portal_listing_status for a in session.scalars(select(App))}
            assert statuses == {"bound": ListingStatus.PENDING_REVIEW,
                                "unbound": ListingStatus.UNLISTED,
                                "listed": ListingStatus.LISTED}
            session.add(OperatorAction(operator="dora", action=OperatorActionKind.LISTING_APPROVED,
                                       subject="bound", created_at=utcnow()))
        migrate.downgrade(engine, "0009")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM operator_actions")).scalar() == 0
            with pytest.raises(IntegrityError):
                conn.execute(text("INSERT INTO operator_actions (operator, action, subject, "
                                  "detail, created_at) VALUES ('dora', 'listing_rejected', "
                                  "'x', '{}', CURRENT_TIMESTAMP)"))
    finally:
        engine.dispose()


def test_relayer_and_deploy_actions_migration(db_url: str) -> None:
    """0019: operator_actions takes the relayer and deploy records; a downgrade drops them
    (its constraint cannot hold them) and keeps the others."""
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    added = (OperatorActionKind.RELAYER_ADD, OperatorActionKind.RELAYER_REMOVE,
             OperatorActionKind.CONTRACT_DEPLOYED)
    try:
        with transaction(sessions) as session:
            for kind in (*added, OperatorActionKind.ALLOWLIST_ADD):
                session.add(OperatorAction(operator="dora", action=kind, subject="0x" + "ab" * 20,
                                           created_at=utcnow()))
        migrate.downgrade(engine, "0018")
        with engine.connect() as conn:
            kept = conn.execute(text("SELECT action FROM operator_actions")).scalars().all()
            assert kept == ["allowlist_add"]
            with pytest.raises(IntegrityError):
                conn.execute(text("INSERT INTO operator_actions (operator, action, subject, "
                                  "detail, created_at) VALUES ('dora', 'relayer_add', "
                                  "'x', '{}', CURRENT_TIMESTAMP)"))
        migrate.upgrade(engine)
        with transaction(sessions) as session:
            session.add(OperatorAction(operator="dora", action=OperatorActionKind.RELAYER_ADD,
                                       subject="0x" + "cd" * 20, created_at=utcnow()))
    finally:
        engine.dispose()


def test_ownership_transfer_action_migration(db_url: str) -> None:
    """0020: operator_actions takes ``contract_ownership_transferred``; a downgrade drops
    those records (its constraint cannot hold them) and keeps the others."""
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    try:
        with transaction(sessions) as session:
            for kind in (OperatorActionKind.CONTRACT_OWNERSHIP_TRANSFERRED,
                         OperatorActionKind.CONTRACT_DEPLOYED):
                session.add(OperatorAction(operator="dora", action=kind, subject="0x" + "ab" * 20,
                                           created_at=utcnow()))
        migrate.downgrade(engine, "0019")
        with engine.connect() as conn:
            kept = conn.execute(text("SELECT action FROM operator_actions")).scalars().all()
            assert kept == ["contract_deployed"]
            with pytest.raises(IntegrityError):
                conn.execute(text("INSERT INTO operator_actions (operator, action, subject, "
                                  "detail, created_at) VALUES ('dora', "
                                  "'contract_ownership_transferred', 'x', '{}', "
                                  "CURRENT_TIMESTAMP)"))
        migrate.upgrade(engine)
        with transaction(sessions) as session:
            session.add(OperatorAction(
                operator="dora", action=OperatorActionKind.CONTRACT_OWNERSHIP_TRANSFERRED,
                subject="0x" + "cd" * 20, created_at=utcnow()))
    finally:
        engine.dispose()


def test_ownership_handover_actions_migration(db_url: str) -> None:
    """0022: operator_actions takes the two-step handover's records (offered, cancelled,
    accepted); a downgrade drops those (its constraint cannot hold them) and keeps the
    one-step ``contract_ownership_transferred``."""
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    added = (OperatorActionKind.CONTRACT_OWNERSHIP_OFFERED,
             OperatorActionKind.CONTRACT_OWNERSHIP_CANCELLED,
             OperatorActionKind.CONTRACT_OWNERSHIP_ACCEPTED)
    try:
        with transaction(sessions) as session:
            for kind in (*added, OperatorActionKind.CONTRACT_OWNERSHIP_TRANSFERRED):
                session.add(OperatorAction(operator="dora", action=kind, subject="0x" + "ab" * 20,
                                           created_at=utcnow()))
        migrate.downgrade(engine, "0021")
        with engine.connect() as conn:
            kept = conn.execute(text("SELECT action FROM operator_actions")).scalars().all()
            assert kept == ["contract_ownership_transferred"]
            with pytest.raises(IntegrityError):
                conn.execute(text("INSERT INTO operator_actions (operator, action, subject, "
                                  "detail, created_at) VALUES ('dora', "
                                  "'contract_ownership_accepted', 'x', '{}', "
                                  "CURRENT_TIMESTAMP)"))
        migrate.upgrade(engine)
        with transaction(sessions) as session:
            for kind in added:
                session.add(OperatorAction(operator="dora", action=kind,
                                           subject="0x" + "cd" * 20, created_at=utcnow()))
    finally:
        engine.dispose()


def test_config_revision_state_migration(db_url: str) -> None:
    """0012: revisions keep the state they left; those recorded before have none (SQL NULL,
    as a revision that could not record one), which rollback reads as "no state"."""
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    try:
        with transaction(sessions) as session:
            app = App(name="Arcade", slug="arcade")
            session.add(app)
            session.flush()
            for number, state in ((1, {"schemaVersion": "svc.config.v1"}), (2, None)):
                session.add(ConfigRevision(
                    app_id=app.id, number=number, mode="merge", config={"n": number},
                    state=state, ops=[], summary={}, applied_by="zdev_x", via="cli",
                    created_at=utcnow()))

        def nulls() -> int:
            with engine.connect() as conn:
                return int(conn.execute(text("SELECT count(*) FROM config_revisions WHERE "
                                             "state IS NULL")).scalar_one())
        assert nulls() == 1  # None is stored as SQL NULL, not the JSON text null
        migrate.downgrade(engine, "0011")
        columns = {c["name"] for c in inspect(engine).get_columns("config_revisions")}
        assert "state" not in columns and "config" in columns
        migrate.upgrade(engine)
        assert nulls() == 2
        with transaction(sessions) as session:
            found = session.scalars(select(ConfigRevision).order_by(ConfigRevision.number))
            assert [(r.config, r.state) for r in found] == [({"n": 1}, None), ({"n": 2}, None)]
    finally:
        engine.dispose()


def test_webhook_events_delivery_index_migration(db_url: str) -> None:
    """0014: a delivery's events (its legacy twin, ``delivery.fulfilled``'s lookups) are
    found through an index on webhook_events.delivery_id, not a scan of every event."""
    engine = make_engine(db_url)

    def indexed() -> list[list[str | None]]:
        return [i["column_names"] for i in inspect(engine).get_indexes("webhook_events")]
    try:
        assert ["delivery_id"] in indexed()
        if engine.dialect.name == "sqlite":  # the planner's choice, on an empty table too
            with engine.connect() as conn:
                plan = " ".join(str(row[-1]) for row in conn.execute(text(
                    "EXPLAIN QUERY PLAN SELECT id FROM webhook_events WHERE delivery_id = 'x' "
                    "AND type = 'delivery.created'")))
            assert "USING INDEX ix_webhook_events_delivery_id" in plan, plan
        migrate.downgrade(engine, "0013")
        assert ["delivery_id"] not in indexed()
        migrate.upgrade(engine)
        assert ["delivery_id"] in indexed()
    finally:
        engine.dispose()


@pytest.mark.parametrize("name", ["Docs", "API", "Account", "Admin", "statusz"])
def test_reserved_slug_refused(sessions: sessionmaker[Session], name: str) -> None:
    with pytest.raises(ApiError) as caught, transaction(sessions) as session:
        create_app_record(session, name=name)
    assert caught.value.code == "reserved_slug"
    assert caught.value.status == 422
    assert name.lower() in caught.value.message
    # the developer typed a name, not a slug: the message names it and asks for a slug
    assert f"name '{name}'" in caught.value.message and "choose a slug" in caught.value.message


@pytest.mark.parametrize("name", ["Статистика", "!!!", "游戏"])
def test_a_name_that_makes_no_slug_is_named_in_the_error(sessions: sessionmaker[Session],
                                                         name: str) -> None:
    with pytest.raises(ApiError) as caught, transaction(sessions) as session:
        create_app_record(session, name=name)
    assert (caught.value.code, caught.value.status) == ("invalid_slug", 422)
    assert caught.value.message.startswith(
        f"Could not make an address from the name '{name}'"), caught.value.message
    assert "''" not in caught.value.message and "choose a slug" in caught.value.message
    with transaction(sessions) as session:
        assert create_app_record(session, name=name, slug="stats-1").slug == "stats-1"


def test_duplicate_slug_refused(sessions: sessionmaker[Session]) -> None:
    with transaction(sessions) as session:
        create_app_record(session, name="Snake")
    with pytest.raises(ApiError) as caught, transaction(sessions) as session:
        create_app_record(session, name="snake")
    assert caught.value.code == "slug_taken"
    assert "from the name 'snake'" in caught.value.message
    with pytest.raises(ApiError) as explicit, transaction(sessions) as session:
        create_app_record(session, name="Other", slug="snake")
    assert explicit.value.message == "The slug 'snake' is already taken."
