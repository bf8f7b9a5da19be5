"""``svc-ops migrate|downgrade|db-revision``, and the schema check of the workers.

A schema ahead of this code (a revision its migrations do not know: a newer version's) is
one it runs on, as the servers do (payments/migrate.py). ``migrate`` on it does nothing and
exits 0: compose's ``migrate`` service (and any deploy script) of a rolled-back version must
succeed for the rest to start. Moving such a schema is for the version that knows it, so an
explicit ``--revision`` or a ``downgrade`` is refused with what to run instead.
"""

from __future__ import annotations

import argparse
import sys

from sqlalchemy import Engine

from payments import migrate

COMMANDS = ("migrate", "downgrade", "db-revision")


class SchemaRefused(Exception):
    """The schema is not one this command may work on; printed without a traceback."""


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    up = sub.add_parser("migrate", help="upgrade the database schema")
    up.add_argument("--revision", default="head")
    down = sub.add_parser("downgrade", help="downgrade the database schema")
    down.add_argument("revision")
    sub.add_parser("db-revision", help="print the current and latest schema revisions")


def run(args: argparse.Namespace, engine: Engine) -> int:
    schema = migrate.schema_of(engine)
    if schema.state is migrate.SchemaState.AHEAD and args.command != "db-revision":
        if args.command == "migrate" and args.revision == "head":
            print(f"svc-ops: {schema.describe()}. Nothing to migrate.", file=sys.stderr)
        else:
            print(f"svc-ops: {schema.describe()}. This version cannot move it: run `svc-ops "
                  f"downgrade {schema.head}` with the version that wrote "
                  f"{schema.current} first.", file=sys.stderr)
            return 2
    elif args.command == "migrate":
        migrate.upgrade(engine, args.revision)
    elif args.command == "downgrade":
        migrate.downgrade(engine, args.revision)
    schema = migrate.schema_of(engine)
    print(f"current={schema.current} head={schema.head}")
    if schema.state is not migrate.SchemaState.CURRENT:
        print(f"{schema.state.value}: {schema.describe()}")
    return 0


def require_usable(engine: Engine, worker: str) -> None:
    """A worker runs on the schema the servers would: at or ahead of this code's head."""
    try:
        schema = migrate.require_usable(engine)
    except migrate.SchemaBehind as behind:
        raise SchemaRefused(f"{worker}: {behind}") from None
    if schema.state is migrate.SchemaState.AHEAD:
        print(f"svc-ops: {worker}: {schema.describe()}", file=sys.stderr, flush=True)
