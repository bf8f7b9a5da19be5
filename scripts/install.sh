#!/usr/bin/env bash
# Install everything the service and its tests need on a fresh Debian machine (as root),
# into one virtual environment at .venv. Safe to run again: it skips what is present.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
command -v chromium >/dev/null || need_apt+=(chromium)
command -v nginx >/dev/null || need_apt+=(nginx)
command -v wrk >/dev/null || need_apt+=(wrk)
command -v node >/dev/null || need_apt+=(nodejs npm)
# the fast path's modules are compiled with mypyc (scripts/build_native.py): a C compiler,
# and Python's headers where this python3 is Debian's (pyenv and python.org builds have them)
command -v gcc >/dev/null || need_apt+=(gcc)
python3 -c 'import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
  || need_apt+=(python3-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install.sh: missing ${need_apt[*]}; run as root (or install them) first" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[dev]'
  rm -f .venv/.installed-*
  touch "$stamp"
fi

if [ -f contracts/package-lock.json ]; then
  lock=contracts/node_modules/.installed-$(sha256sum contracts/package-lock.json | cut -c1-16)
  if [ ! -f "$lock" ]; then
    (cd contracts && npm ci --silent --no-audit --no-fund)
    touch "$lock"
  fi
fi

# Compiled only when what the last build was made from changed (its stamp: the sources,
# mypyc and its settings, uvicorn, Python);
# scripts/test.sh passes --no-native and builds beside its type check instead.
if [ "${1:-}" != "--no-native" ]; then
  .venv/bin/python scripts/build_native.py
fi
