"""``svc-ops``: operator commands: database migrations and the chain (``ops.chain``)."""

from __future__ import annotations

import argparse
import sys

from ops import chain
from payments import migrate
from payments.chain.gateway import ChainError
from payments.db import make_engine, make_sessionmaker
from router.settings import SettingsError, load_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="svc-ops")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("migrate", help="upgrade the database schema")
    up.add_argument("--revision", default="head")
    down = sub.add_parser("downgrade", help="downgrade the database schema")
    down.add_argument("revision")
    sub.add_parser("db-revision", help="print the current and latest schema revisions")
    chain.add_parsers(sub)
    args = parser.parse_args(argv)
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"svc-ops: {exc}", file=sys.stderr)
        return 2
    engine = make_engine(settings.database_url)
    try:
        if args.command in ("allowlist", "chain"):
            return chain.run(args, settings, make_sessionmaker(engine))
        if args.command == "migrate":
            migrate.upgrade(engine, args.revision)
        elif args.command == "downgrade":
            migrate.downgrade(engine, args.revision)
        print(f"current={migrate.current_revision(engine)} head={migrate.head_revision(engine)}")
    except chain.OpsError as exc:
        print(f"svc-ops: {exc}", file=sys.stderr)
        return 2
    except ChainError as exc:  # decoded reverts and node failures; never a key
        print(f"svc-ops: chain: {exc}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
