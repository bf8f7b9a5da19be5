"""``svc-ops``: operator commands: database migrations, the chain (``ops.chain``, its relayers
``ops.relayers``, the contract's deploy ``ops.contract`` and its handover ``ops.ownership``),
runtime domains and the kill switch (``ops.runtime``), reviews (hosted app, pay_to, portal
listing) and the audit log (``ops.review``), the webhook dispatcher (``ops.webhooks``).

Settings are checked for what the commands use, not for what a server needs
(``load_settings(role="operator")``): ``svc-ops migrate`` runs with ``SVCSRV_DATABASE_URL``
alone, also in production. Every command uses the database, so production refuses an
unset ``SVCSRV_DATABASE_URL`` (it would be a new SQLite file in the working directory) and
dev says on stderr which SQLite file it uses. Log lines go to stderr (ops/logs.py):
warnings and up, and INFO with ``--verbose`` (before or after the command). Exit codes:
ops/exits.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ops import chain, contract, relayers, review, runtime, schema, webhooks
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
from svc.pipes import finished

VERBOSE_HELP = "log at INFO on stderr (default: warnings and errors)"
SCHEMA_COMMANDS = ("migrate", "downgrade", "db-revision")


class CommandParser(argparse.ArgumentParser):
    """Every command's parser (and its subcommands', which argparse makes of the same
    class): each takes ``--verbose``, so it goes before or after the command, as in ``svc``
    (svc/cli.py gives each command a parent for it; here the class does, so no command of
    the seven modules that add them can miss it). SUPPRESS: a default of the command's
    would overwrite the True of a ``--verbose`` before it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                          help=VERBOSE_HELP)


def main(argv: list[str] | None = None) -> int:
    return finished(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="svc-ops")
    parser.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    sub: argparse._SubParsersAction[argparse.ArgumentParser] = parser.add_subparsers(
        dest="command", required=True, parser_class=CommandParser)
    up = sub.add_parser("migrate", help="upgrade the database schema")
    up.add_argument("--revision", default="head")
    down = sub.add_parser("downgrade", help="downgrade the database schema")
    down.add_argument("revision")
    sub.add_parser("db-revision", help="print the current and latest schema revisions")
    chain.add_parsers(sub)
    relayers.add_parsers(sub)
    contract.add_parsers(sub)
    runtime.add_parsers(sub)
    review.add_parsers(sub)
    webhooks.add_parsers(sub)
    args = parser.parse_args(argv)
    try:
        settings = load_settings(role="operator")
        check_command(args, settings)
    except SettingsError as exc:
        print(f"svc-ops: {exc}", file=sys.stderr)
        return Exit.REFUSED
    if settings.database_url == DEV_DATABASE_URL:
        print(dev_database_warning(), file=sys.stderr, flush=True)
    with stderr_logging(settings, verbose=args.verbose):
        return int(run(args, settings))


def run(args: argparse.Namespace, settings: Settings) -> int:
    engine = make_engine(settings.database_url, pool_size=settings.db_pool_size,
                         max_overflow=settings.db_max_overflow)
    try:
        if args.command not in SCHEMA_COMMANDS:
            # Every other command reads or writes the ledger, on the schema the servers
            # would (at or ahead of this code's): before `svc-ops migrate` one says so,
            # rather than failing at its first query with the database's traceback.
            action = getattr(args, "action", None)
            schema.require_usable(engine, f"{args.command} {action}" if action
                                  else args.command)
        if args.command in ("allowlist", "chain"):
            return chain.run(args, settings, make_sessionmaker(engine))
        if args.command == "relayer":
            return relayers.run(args, settings, make_sessionmaker(engine))
        if args.command == "contract":
            return contract.run(args, settings, make_sessionmaker(engine))
        if args.command in ("domain", "kill-switch"):
            return runtime.run(args, settings, make_sessionmaker(engine))
        if args.command == "webhooks":
            return webhooks.run(args, settings, make_sessionmaker(engine))
        if args.command in ("review", "pay-to", "listing", "actions", "notifications"):
            return review.run(args, settings, make_sessionmaker(engine))
        return schema.run(args, engine)  # SCHEMA_COMMANDS
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


if __name__ == "__main__":
    raise SystemExit(main())
