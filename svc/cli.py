"""``svc``: the developer CLI (spec 4.10). Its command groups arrive issue by issue."""

from __future__ import annotations

import argparse

from svc import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="svc", description="Developer CLI for the service.")
    parser.add_argument("--version", action="version", version=f"svc {__version__}")
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
