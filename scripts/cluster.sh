#!/usr/bin/env bash
# Install everything, then run the production topology on loopback (docs/deploy.md): nginx
# with TLS in front of two `svc-server serve` instances (two processes each), PostgreSQL,
# Redis, the chain and webhook workers as their own processes, a Hardhat JSON-RPC chain and
# the demo app. Prints the URLs; Ctrl-C stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/python -m ops.cluster "$@"
