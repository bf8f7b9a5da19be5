#!/usr/bin/env bash
# Install everything, then lint, type-check and run the whole test suite. The tests
# start their own PostgreSQL and Redis servers on loopback (tests/support/services.py)
# and stop them by pid when they finish.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --no-native
# The compiled fast path (scripts/build_native.py, about 20 s from clean) builds while
# ruff and mypy check: two cores, and the tests need both done.
.venv/bin/python scripts/build_native.py &
native=$!
.venv/bin/ruff check .
.venv/bin/mypy
wait "$native"
# Two workers by default (SVC_TEST_WORKERS to change): each starts its own PostgreSQL, Redis
# and browser; modules with a costly module-scoped fixture stay on one worker (loadgroup,
# tests/conftest.py). The slowest tests are listed at the end.
exec .venv/bin/pytest -n "${SVC_TEST_WORKERS:-2}" --dist loadgroup --durations=25 "$@"
