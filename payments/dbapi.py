"""Core statements compiled once per dialect and run on the driver's own cursor.

The paying transaction sends about a dozen single-row statements, and SQLAlchemy's per-call
machinery (cache key, execution context, result metadata, ORM loading) cost more CPU than
the database spent on them: one SELECT of ``apps`` by slug took 316 us through the ORM,
229 us through Core and 99 us on the psycopg connection (docs/decisions.md). A
:class:`Compiled` keeps SQLAlchemy for what it is good at, once: the SQL text of each
dialect, and the type processors (enums by value, UTC datetimes, JSON) of every bound
parameter and result column. Each call then only converts the values and executes on the
DBAPI connection under the session's transaction. The statements stay the ones defined
in Core, so SQLite and PostgreSQL run the same statement definitions.

Only for simple statements: bound parameters by name, no expanding ``IN``, and no computed
Python-side defaults: an INSERT must be given every computed column it writes, an UPDATE
every ``onupdate`` column, or it fails loudly (KeyError) instead of writing a gap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy import Connection, Table, inspect
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Session
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

T = TypeVar("T")
Processor = Callable[[Any], Any] | None


class _Plan:
    """One statement, compiled for one dialect."""

    __slots__ = ("binds", "constants", "names", "positional", "results", "sql", "statement")

    def __init__(self, statement: ClauseElement, dialect: Dialect,
                 column_keys: Sequence[str] | None) -> None:
        self.statement = statement
        compiled = statement.compile(dialect=dialect,
                                     column_keys=list(column_keys) if column_keys else None)
        assert isinstance(compiled, SQLCompiler)
        self.sql = compiled.string
        self.positional = compiled.positiontup is not None
        self.names: tuple[str, ...] = tuple(compiled.positiontup or compiled.binds)
        self.constants: dict[str, Any] = {}
        self.binds: dict[str, Processor] = {}
        for name, bind in compiled.binds.items():
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if not bind.required and (bind.value is not None or bind.callable is not None):
                # A literal of the statement (``kind == 'payment'``): fixed at compile time.
                value = bind.effective_value
                self.constants[name] = process(value) if process else value
            else:
                self.binds[name] = process
        # A SELECT's columns, or what an INSERT/UPDATE/DELETE returns (none: empty).
        selected: Any = getattr(statement, "selected_columns", None)
        columns: list[Any] = list(selected or getattr(statement, "exported_columns", ()))
        self.results: tuple[Processor, ...] = tuple(
            column.type.dialect_impl(dialect).result_processor(dialect, None)
            for column in columns)

    def parameters(self, values: Mapping[str, Any]) -> Sequence[Any] | dict[str, Any]:
        converted = dict(self.constants)
        for name, process in self.binds.items():
            value = values[name]  # a KeyError names a parameter the caller did not give
            converted[name] = process(value) if process is not None and value is not None \
                else value
        if self.positional:
            return [converted[name] for name in self.names]
        return converted

    def row(self, raw: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(value if process is None or value is None else process(value)
                     for process, value in zip(self.results, raw, strict=True))


class Compiled:
    """A Core statement run on the DBAPI connection of a session's transaction.

    ``statement`` may be one statement or, where the SQL differs by backend (``ON
    CONFLICT``), a mapping from dialect name to statement. ``column_keys`` names the
    columns an INSERT writes.
    """

    def __init__(self, statement: ClauseElement | Mapping[str, ClauseElement],
                 column_keys: Sequence[str] | None = None,
                 defaults: Mapping[str, Any] | None = None) -> None:
        self._statement = statement
        self._column_keys = column_keys
        self._defaults = dict(defaults or {})
        # id(dialect) -> (dialect, plan). The dialect is held, so its id cannot be reused by
        # another engine's dialect (tests make many) while this plan is cached under it.
        self._plans: dict[int, tuple[Dialect, _Plan]] = {}

    @classmethod
    def insert(cls, table: Table, statement: ClauseElement | Mapping[str, ClauseElement]
               ) -> Compiled:
        """An INSERT into ``table`` writing every column but its autoincrement key. A
        column the caller leaves out takes its scalar default, or NULL if it is nullable
        and has none; one whose default is computed (ids, timestamps) must be given."""
        columns = [c for c in table.columns if c is not table.autoincrement_column]
        defaults: dict[str, Any] = {}
        for c in columns:
            if c.default is None and c.server_default is None and c.nullable:
                defaults[c.key] = None
            elif c.default is not None and c.default.is_scalar:
                defaults[c.key] = c.default.arg  # type: ignore[attr-defined]
        return cls(statement, [c.key for c in columns], defaults)

    def _plan(self, connection: Connection) -> _Plan:
        dialect = connection.dialect
        cached = self._plans.get(id(dialect))
        if cached is not None and cached[0] is dialect:
            return cached[1]
        statement = self._statement
        if isinstance(statement, Mapping):
            statement = statement[dialect.name]
        # The engine's own dialect instance: it carries the engine's JSON serializer.
        plan = _Plan(statement, dialect, self._column_keys)
        self._plans[id(dialect)] = (dialect, plan)
        return plan

    def _execute(self, session: Session, values: Mapping[str, Any]) -> tuple[_Plan, Any]:
        connection = session.connection()  # begins the session's transaction if needed
        plan = self._plan(connection)
        cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
        if self._defaults:
            values = {**self._defaults, **values}
        cursor.execute(plan.sql, plan.parameters(values))
        after = connection.dispatch.after_execute
        if after:
            # The engine's after_execute listeners still see every statement (the webhook
            # wakeup watches for outbox INSERTs); they get no Result, as there is none.
            after(connection, plan.statement, (), values, {}, None)
        return plan, cursor

    def run(self, session: Session, values: Mapping[str, Any]) -> int:
        """Execute; the number of rows affected."""
        _, cursor = self._execute(session, values)
        count = cursor.rowcount
        cursor.close()
        return int(count)

    def first(self, session: Session, values: Mapping[str, Any]) -> tuple[Any, ...] | None:
        """Execute; the first row, converted, or None."""
        plan, cursor = self._execute(session, values)
        raw = cursor.fetchone()
        # Read what is left so that a RETURNING statement has finished on every backend.
        cursor.fetchall()
        cursor.close()
        return None if raw is None else plan.row(raw)

    def scalar(self, session: Session, values: Mapping[str, Any]) -> Any:
        row = self.first(session, values)
        return None if row is None else row[0]

    def entity(self, session: Session, cls: type[T], values: Mapping[str, Any]) -> T | None:
        """Execute a statement selecting (or returning) every column of ``cls``'s table;
        the first row as a detached instance (not in the session; changing it changes
        nothing in the database)."""
        row = self.first(session, values)
        return None if row is None else load(cls, row)


_KEYS: dict[type, tuple[Callable[[], Any], tuple[str, ...]]] = {}


def load(cls: type[T], row: Sequence[Any]) -> T:
    """An instance of the mapped ``cls`` from a row of all its table's columns, in table
    order, built the way the ORM's loader does (state created, attributes set in its
    dict) without the identity map."""
    known = _KEYS.get(cls)
    if known is None:
        mapper = inspect(cls)
        keys = tuple(mapper.get_property_by_column(column).key
                     for column in mapper.local_table.columns)
        known = _KEYS[cls] = (mapper.class_manager.new_instance, keys)
    new_instance, keys = known
    instance: T = new_instance()
    instance.__dict__.update(zip(keys, row, strict=True))
    return instance
