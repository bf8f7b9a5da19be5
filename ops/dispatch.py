"""Running a parsed ``svc-ops`` command (ops/cli.py parses it): its settings, its log lines,
the database, the schema check, its module's ``run``, and the exit code of what it raises.

Settings are checked for what the commands use, not for what a server needs
(``load_settings(role="operator")``): ``svc-ops migrate`` runs with ``SVCSRV_DATABASE_URL``
alone, also in production. Every command uses the database, so production refuses an
unset ``SVCSRV_DATABASE_URL`` (it would be a new SQLite file in the working directory) and
dev says on stderr which SQLite file it uses. Exit codes: ops/exits.py.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Protocol, cast

from sqlalchemy.orm import Session, sessionmaker

from ops import schema
from ops.exits import Exit
from ops.logs import stderr_logging
from ops.owner_tx import OpsError
from payments.chain.gateway import ChainError
from payments.db import make_engine, make_sessionmaker
from payments.errors import ApiError
from router.settings import (
    DEV_DATABASE_URL,
    ENV_PREFIX,
    Settings,
    SettingsError,
    load_settings,
)
from router.settings_checks import require_secret_key


class Runs(Protocol):
    """What a command module (other than ops.schema) runs a command with."""

    def run(self, args: argparse.Namespace, settings: Settings,
            sessions: sessionmaker[Session]) -> int: ...


def dispatch(args: argparse.Namespace, module: str) -> int:
    """Run ``args.command``, whose module is ``module``; its exit code."""
    try:
        settings = load_settings(role="operator")
        check_command(args, settings)
    except SettingsError as exc:
        print(f"svc-ops: {exc}", file=sys.stderr)
        return Exit.REFUSED
    if settings.database_url == DEV_DATABASE_URL:
        print(dev_database_warning(), file=sys.stderr, flush=True)
    with stderr_logging(settings, verbose=args.verbose):
        return int(run(args, settings, module))


def run(args: argparse.Namespace, settings: Settings, module: str) -> int:
    engine = make_engine(settings.database_url, pool_size=settings.db_pool_size,
                         max_overflow=settings.db_max_overflow)
    try:
        if args.command in schema.COMMANDS:
            return schema.run(args, engine)
        # Every other command reads or writes the ledger, on the schema the servers would
        # (at or ahead of this code's): before `svc-ops migrate` one says so, rather than
        # failing at its first query with the database's traceback.
        action = getattr(args, "action", None)
        schema.require_usable(engine, f"{args.command} {action}" if action else args.command)
        runs = cast(Runs, importlib.import_module(module))
        return runs.run(args, settings, make_sessionmaker(engine))
    except (OpsError, schema.SchemaRefused) as exc:
        print(f"svc-ops: {exc}", file=sys.stderr)
        return Exit.REFUSED
    except ApiError as exc:  # an operator decision the state does not allow
        print(f"svc-ops: {exc.message}", file=sys.stderr)
        return Exit.NOT_DONE
    except ChainError as exc:  # decoded reverts and node failures; never a key
        print(f"svc-ops: chain: {exc}", file=sys.stderr)
        return Exit.NOT_DONE
    finally:
        engine.dispose()


def check_command(args: argparse.Namespace, settings: Settings) -> None:
    """What one command needs beyond well-formed settings. The chain commands check their
    own (``ops.chain.connect``); the rest need only the database."""
    if args.command == "webhooks" and args.action == "run":
        require_secret_key(settings)  # it opens the sealed signing secrets


def dev_database_warning() -> str:
    path = Path(DEV_DATABASE_URL.removeprefix("sqlite:///")).resolve()
    return (f"svc-ops: warning: {ENV_PREFIX}DATABASE_URL is unset (or the dev default "
            f"{DEV_DATABASE_URL}): using the SQLite database {path}, created if missing. "
            f"Set {ENV_PREFIX}DATABASE_URL to the servers' database.")
