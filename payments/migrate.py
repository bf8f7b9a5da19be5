"""Run Alembic migrations programmatically (``svc-ops migrate``, server start, tests), and
judge whether a database's schema is one this code can run on (:func:`schema_of`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

MIGRATIONS = Path(__file__).with_name("migrations")


class SchemaState(StrEnum):
    CURRENT = "current"
    # A revision this code's scripts do not know: a newer version's (after `svc-ops migrate`
    # of a rolling upgrade, or before a code rollback), since migrations only add. Usable.
    AHEAD = "schema_ahead"
    # An older revision of our own chain, or no schema at all: refused outside dev.
    BEHIND = "migrations_pending"


@dataclass(frozen=True)
class Schema:
    state: SchemaState
    current: str | None
    head: str | None

    @property
    def usable(self) -> bool:
        return self.state is not SchemaState.BEHIND

    def describe(self) -> str:
        if self.state is SchemaState.CURRENT:
            return f"database schema at {self.current}, this code's latest migration"
        if self.state is SchemaState.AHEAD:
            return (f"database schema at {self.current}, which this code's migrations (latest "
                    f"{self.head}) do not know: a newer version's migration (or another "
                    "project's database); running on it, as migrations only add")
        return (f"database schema at {self.current or 'none'}, behind this code's "
                f"{self.head}; run `svc-ops migrate` first")


class SchemaBehind(RuntimeError):
    """The database is older than this code: nothing may run on it before a migrate."""


def alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    config = alembic_config(engine)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    config = alembic_config(engine)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


@cache
def _scripts() -> tuple[str | None, frozenset[str]]:
    """This code's migrations: the head and every revision. Read once per process (alembic
    loads every script file to know them; /statusz asks at each request, a server start up
    to three times): they are this code's own files, which only :func:`revision` adds to."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    script = ScriptDirectory.from_config(config)
    return script.get_current_head(), frozenset(rev.revision for rev in script.walk_revisions())


def head_revision(engine: Engine) -> str | None:
    return _scripts()[0]


def schema_of(engine: Engine) -> Schema:
    """Where the database's schema stands against this code's migrations. Only a revision
    outside our chain is ahead: one of ours that is not the head is behind."""
    (head, known), current = _scripts(), current_revision(engine)
    if current == head:
        return Schema(SchemaState.CURRENT, current, head)
    state = SchemaState.BEHIND if current is None or current in known else SchemaState.AHEAD
    return Schema(state, current, head)


def require_usable(engine: Engine) -> Schema:
    """The schema, when this code may run on it (at or ahead of its head); else SchemaBehind."""
    schema = schema_of(engine)
    if not schema.usable:
        raise SchemaBehind(schema.describe())
    return schema


def upgrade_unless_ahead(engine: Engine) -> Schema:
    """Upgrade to head, except on a schema ahead of this code: alembic cannot place a
    revision it has no script for, and a newer schema needs nothing from us. One at the head
    needs nothing either (what a dev server finds at each start after the first)."""
    schema = schema_of(engine)
    if schema.state is not SchemaState.BEHIND:
        return schema
    upgrade(engine)
    return schema_of(engine)


def revision(engine: Engine, message: str) -> None:
    """Autogenerate a new revision (a developer tool; run against an upgraded database)."""
    config = alembic_config(engine)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.revision(config, message=message, autogenerate=True)
    _scripts.cache_clear()  # the new script is this code's head now
