"""``python -m examples.reference_app --host 127.0.0.1 --port 8080 [--products FILE]``.

Reads the spec 4.11 variables (and ``SVC_API_URL``/``SVC_PORTAL_URL``); a missing or
malformed one stops it with exit code 2 and one line per problem.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import uvicorn

from examples.reference_app.app import create_app
from examples.reference_app.catalogue import Catalogue, CatalogueError
from examples.reference_app.settings import Settings, SettingsError
from svc.int_flags import whole_number


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.reference_app",
                                     description="The reference developer app.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=whole_number, default=8080)
    parser.add_argument("--products", type=Path, metavar="FILE",
                        help="the catalogue: JSON as `svc product list --json` prints it")
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env(os.environ)
    except SettingsError as exc:
        for problem in exc.problems:
            print(f"reference app: {problem}", file=sys.stderr)
        return 2
    try:
        catalogue = Catalogue.from_file(args.products) if args.products else None
    except CatalogueError as exc:
        print(f"reference app: --products {exc}", file=sys.stderr)
        return 2
    uvicorn.run(create_app(settings, catalogue=catalogue), host=args.host, port=args.port,
                log_level="info", proxy_headers=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
