"""``svc-ops``: operator commands: database migrations, the chain (``ops.chain``), runtime
domains and the kill switch (``ops.runtime``), reviews (hosted app, pay_to, portal listing)
and the audit log (``ops.review``), the webhook dispatcher (``ops.webhooks``)."""

from __future__ import annotations

import argparse
import sys

from ops import chain, review, runtime, webhooks
from payments import migrate
from payments.chain.gateway import ChainError
from payments.db import make_engine, make_sessionmaker
from payments.errors import ApiError
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
    runtime.add_parsers(sub)
    review.add_parsers(sub)
    webhooks.add_parsers(sub)
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
        if args.command in ("domain", "kill-switch"):
            return runtime.run(args, settings, make_sessionmaker(engine))
        if args.command == "webhooks":
            return webhooks.run(args, settings, make_sessionmaker(engine))
        if args.command in ("review", "pay-to", "listing", "actions", "notifications"):
            return review.run(args, settings, make_sessionmaker(engine))
        if args.command == "migrate":
            migrate.upgrade(engine, args.revision)
        elif args.command == "downgrade":
            migrate.downgrade(engine, args.revision)
        print(f"current={migrate.current_revision(engine)} head={migrate.head_revision(engine)}")
    except chain.OpsError as exc:
        print(f"svc-ops: {exc}", file=sys.stderr)
        return 2
    except ApiError as exc:  # an operator decision the state does not allow
        print(f"svc-ops: {exc.message}", file=sys.stderr)
        return 1
    except ChainError as exc:  # decoded reverts and node failures; never a key
        print(f"svc-ops: chain: {exc}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
