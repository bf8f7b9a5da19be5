#!/usr/bin/env bash
# Install everything, then lint, type-check and run the whole test suite. The tests
# start their own PostgreSQL and Redis servers on loopback (tests/support/services.py)
# and stop them by pid when they finish.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
.venv/bin/ruff check .
.venv/bin/mypy
exec .venv/bin/pytest "$@"
