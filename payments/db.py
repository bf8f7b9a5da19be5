"""Engine and session factory: one place that knows SQLite from PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlalchemy import DateTime, Engine, Enum, MetaData, String, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import DeclarativeBase, Session, mapped_column, sessionmaker
from sqlalchemy.types import TypeDecorator

from payments.ids import IdPrefix, new_id

# Stable constraint names so Alembic migrations can drop what they create on both engines.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def utcnow() -> datetime:
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on both backends (SQLite would hand back naive ones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None or value.tzinfo is not None:
            return value
        return value.replace(tzinfo=UTC)


def id_column(prefix: IdPrefix) -> Any:
    """A string primary key that defaults to a new id with ``prefix``."""
    return mapped_column(String(48), primary_key=True, default=lambda: new_id(prefix))


def time_column(nullable: bool = False) -> Any:
    """A UTC timestamp: ``now`` by default, or nullable and empty."""
    if nullable:
        return mapped_column(UtcDateTime, default=None, nullable=True)
    return mapped_column(UtcDateTime, default=utcnow)


def enum_column(cls: type[StrEnum], name: str | None = None) -> Enum:
    """A string enum stored by value, with a CHECK constraint, on both backends.

    ``name`` names the constraint; give one when a table has two columns of one enum.
    """
    return Enum(cls, native_enum=False, create_constraint=True, length=32,
                values_callable=lambda members: [m.value for m in members],
                name=name or cls.__name__.lower())


def normalize_url(url: str) -> str:
    """Use psycopg 3 for ``postgresql://`` URLs (SQLAlchemy would default to psycopg2)."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def make_engine(url: str, *, pool_size: int = 10, max_overflow: int = 20,
                **kwargs: Any) -> Engine:
    """An engine for ``url``; ``pool_size`` and ``max_overflow`` size a PostgreSQL pool
    (SQLite takes one writer at a time whatever the pool)."""
    url = normalize_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30}, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        # pysqlite's own BEGIN handling defers locking; take the write lock at BEGIN so
        # a read-then-write transaction cannot deadlock against another writer.
        event.listen(engine, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(url, pool_size=pool_size, max_overflow=max_overflow, **kwargs)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (see make_engine)
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work: commit on success, roll back on any error."""
    with factory() as session, session.begin():
        yield session
