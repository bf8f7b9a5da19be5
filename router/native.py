"""Which router modules run compiled, and whether that build matches their sources.

The fast path's modules are plain, typed Python; ``scripts/build_native.py`` (run by
``scripts/install.sh``) compiles them to C extension modules with mypyc, beside their
sources, where Python's import prefers them. Compiled, the router's Python per proxied
request takes 0.51x (GET) and 0.49x (POST) of the time (bench/fast_path_cpu.py, 2026-11-28;
0.66x and 0.72x when first compiled), and its CPU
per request in case 2 of bench/proxy_cases.py fell by about 15% (docs/BENCHMARKS.md,
docs/decisions.md). The server image builds them in a stage of
its own (Dockerfile). Without a build (a checkout never installed) the same sources run as
they are.

A build is stamped with a digest of what it was made from: a source edited since is
reported ``stale`` (the server warns at start; tests/router/test_native.py fails) rather
than silently running the code from before the edit.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import sys
from pathlib import Path
from typing import Literal

HERE = Path(__file__).resolve().parent
# Every module on a fast-path request's way, and only those: each must stay free of what
# mypyc refuses (a class inheriting from two built-in classes: router/origin_errors.py).
MODULES = ("auth_return_path", "fast_exchange", "fast_path", "fast_protocol", "head_limits",
           "headers", "origin_connection", "request_head", "server_protocol",
           "transport_address", "turns", "upstream_client")
STAMP = HERE / "native.stamp"

Status = Literal["compiled", "pure", "stale"]


def digest(compiler: str) -> str:
    """What a build is made from: the compiler's version, this Python's and every source."""
    hashed = hashlib.sha256(f"{compiler}\n{sys.version}\n".encode())
    for name in MODULES:
        hashed.update(name.encode() + b"\0" + (HERE / f"{name}.py").read_bytes())
    return hashed.hexdigest()


def built() -> list[Path]:
    """The compiled files beside the sources (the modules' and their shared library)."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    return sorted(path for path in HERE.iterdir()
                  if path.name.endswith(suffixes)
                  and path.name.split(".")[0] in (*MODULES, "native__mypyc"))


def status() -> Status:
    """``compiled`` when every module has a build stamped for its current source, ``pure``
    when there is no build, ``stale`` when there is one for other sources."""
    files = built()
    if not files:
        return "pure"
    try:
        compiler, stamped = STAMP.read_text().split()
    except (OSError, ValueError):
        return "stale"
    names = {path.name.split(".")[0] for path in files}
    if stamped != digest(compiler) or not names.issuperset(MODULES):
        return "stale"
    return "compiled"
