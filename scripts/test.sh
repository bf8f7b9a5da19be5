#!/usr/bin/env bash
# Install everything, then lint, type-check and run the whole test suite. The tests
# start their own PostgreSQL and Redis servers on loopback (tests/support/services.py)
# and stop them by pid when they finish.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
.venv/bin/ruff check .
.venv/bin/mypy
# Two workers by default (SVC_TEST_WORKERS to change): each starts its own PostgreSQL, Redis
# and browser; modules with a costly module-scoped fixture stay on one worker (loadgroup,
# tests/conftest.py). The slowest tests are listed at the end.
exec .venv/bin/pytest -n "${SVC_TEST_WORKERS:-2}" --dist loadgroup --durations=25 "$@"
