#!/usr/bin/env bash
# Install everything, then run the whole service on embedded defaults with the demo app.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/svc-server dev "$@"
