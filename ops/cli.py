"""``svc-ops``: operator commands: database migrations (``ops.schema``), the chain
(``ops.chain``, its relayers ``ops.relayers``, the contract's deploy ``ops.contract`` and its
handover ``ops.ownership``), runtime domains and the kill switch (``ops.runtime``), reviews
(hosted app, pay_to, portal listing) and the audit log (``ops.review``), the webhook
dispatcher (``ops.webhooks``).

This module is the command line; ops/dispatch.py runs a parsed command (settings, logging,
the database, the exit code of an error). A command's module is imported only when that
command is the one given (:data:`COMMANDS`): between them they import SQLAlchemy's models,
alembic, Redis, eth-abi and the DNS resolver, most of a second of CPU, which ``svc-ops
--help`` or a mistyped command has no use for (bench/startup_bench.py). Log lines go to
stderr (ops/logs.py): warnings and up, and INFO with ``--verbose`` (before or after the
command). Exit codes: ops/exits.py.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple, Protocol, cast

from svc.pipes import finished

VERBOSE_HELP = "log at INFO on stderr (default: warnings and errors)"


class Command(NamedTuple):
    module: str  # whose add_parsers() adds the command's parser and whose run() runs it
    help: str  # the command's line in `svc-ops --help`; the same as its module gives


# Every command, in `svc-ops --help`'s order; a module's commands are next to each other.
# The help lines repeat the modules' own, so that --help lists them without importing the
# modules; tests/ops/test_ops_cli.py fails when the two differ.
COMMANDS: dict[str, Command] = {
    "migrate": Command("ops.schema", "upgrade the database schema"),
    "downgrade": Command("ops.schema", "downgrade the database schema"),
    "db-revision": Command("ops.schema", "print the current and latest schema revisions"),
    "allowlist": Command("ops.chain", "the spender's recipient allowlist"),
    "chain": Command("ops.chain", "relayer, settlement and reconciliation"),
    "relayer": Command("ops.relayers", "the spender's relayers (keys that relay permits and "
                       "settle charges)"),
    "contract": Command("ops.contract", "the BudgetSpenderV2 contract"),
    "domain": Command("ops.runtime", "runtime domain requests (<slug>.{apps_domain})"),
    "kill-switch": Command("ops.runtime", "stop (or resume) serving and charging an app"),
    "review": Command("ops.review", "the hosted-app review queue (spec 1.2 rule 4)"),
    "pay-to": Command("ops.review", "pay_to review (testing -> approved)"),
    "listing": Command("ops.review", "portal listing review (pending_review -> listed)"),
    "actions": Command("ops.review", "the operator audit log, newest first"),
    "notifications": Command("ops.review", "internal operator notifications"),
    "webhooks": Command("ops.webhooks", "the webhook dispatcher and its outbox"),
}


class Parsers(Protocol):
    """What a command module gives the command line."""

    def add_parsers(self, sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None: ...


class CommandParser(argparse.ArgumentParser):
    """Every command's parser (and its subcommands', which argparse makes of the same
    class): each takes ``--verbose``, so it goes before or after the command, as in ``svc``
    (svc/cli.py gives each command a parent for it; here the class does, so no command of
    the modules that add them can miss it). SUPPRESS: a default of the command's would
    overwrite the True of a ``--verbose`` before it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                          help=VERBOSE_HELP)


def main(argv: list[str] | None = None) -> int:
    return finished(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    given = sys.argv[1:] if argv is None else argv
    command = COMMANDS.get(command_named(given) or "")
    args = build_parser([command.module] if command else []).parse_args(given)
    # What argparse cannot state of a command (ops/ownership.py: --to, an address or
    # --cancel), with that command's usage line: a usage error, before any setting is read.
    if (check_usage := getattr(args, "check_usage", None)) is not None:
        check_usage(args)
    # Only now the database, the settings and the command's own imports.
    from ops.dispatch import dispatch

    return dispatch(args, COMMANDS[args.command].module)


def command_named(argv: Sequence[str]) -> str | None:
    """The command argparse will take: the first argument that is not an option
    (``svc-ops``'s own options take no value), or the one after ``--``."""
    for index, arg in enumerate(argv):
        if arg == "--":
            return argv[index + 1] if index + 1 < len(argv) else None
        if not arg.startswith("-"):
            return arg
    return None


def build_parser(modules: Collection[str]) -> argparse.ArgumentParser:
    """``svc-ops``'s parser, with the full parsers of the commands of ``modules`` (imported)
    and, for every other command, a stand-in with its help line: it lists the command in
    --help and among the choices, and is never parsed with, since its command is not the
    one given."""
    parser = argparse.ArgumentParser(prog="svc-ops")
    parser.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    sub: argparse._SubParsersAction[argparse.ArgumentParser] = parser.add_subparsers(
        dest="command", required=True, parser_class=CommandParser)
    added: set[str] = set()
    for name, command in COMMANDS.items():
        if command.module not in modules:
            sub.add_parser(name, help=command.help)
        elif command.module not in added:  # all of the module's commands, at its first
            cast(Parsers, importlib.import_module(command.module)).add_parsers(sub)
            added.add(command.module)
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
