"""Compile the router's fast-path modules with mypyc, in place, when their sources changed.

    .venv/bin/python scripts/build_native.py [--force]

Run by scripts/install.sh. The modules (router.native.MODULES) become C extension modules
beside their sources (router/*.so, not in git), stamped with a digest of what they were
made from (router/native.stamp). Needs a C compiler and Python's headers: install.sh
installs gcc where it is missing; the Dockerfile's ``native`` stage runs it for the server
image. ``svc-server`` runs the same sources uncompiled where there is no build.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from router import native  # noqa: E402  (the checkout's router, not an installed one)

SETUP = """\
from mypyc.build import mypycify
from setuptools import setup

setup(
    name="svc-router-native",
    packages=[],
    ext_modules=mypycify({args!r}, group_name="router.native", target_dir={target!r}),
)
"""


# mypy's settings for the build (pyproject.toml's are not read): strict, but what the
# modules import from outside the build is read as Any instead of analysed (scripts/test.sh
# type-checks all of it anyway): 20 s instead of 70, and those objects are Python objects,
# reached the same way either way. Except a class compiled code inherits from: read as
# Any, its layout is unknown and the compiled subclass crashed the process (uvicorn's
# protocol, router/server_protocol.py); strict refuses any such base left as Any.
CONFIG = """\
[mypy]
python_version = 3.11
strict = True
follow_imports = skip
warn_return_any = False
warn_unused_ignores = False

[mypy-uvicorn.*]
follow_imports = normal
"""


def compiler_version() -> str:
    """mypyc's version, its settings and uvicorn's version (the one library the build
    reads the types of): a change to any is a new build."""
    from importlib.metadata import version

    flags = hashlib.sha256(CONFIG.encode()).hexdigest()[:12]
    return f"mypyc-{version('mypy')}-{flags}-uvicorn-{version('uvicorn')}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="build even if up to date")
    options = parser.parse_args()
    compiler = compiler_version()
    wanted = f"{compiler} {native.digest(compiler)}\n"
    if not options.force and native.status() == "compiled" and native.STAMP.read_text() == wanted:
        print("build_native: router fast path up to date (compiled)")
        return 0
    for path in native.built():
        path.unlink()  # a half-replaced build must not be imported
    native.STAMP.unlink(missing_ok=True)
    started = time.monotonic()
    build = ROOT / "build" / "native"
    build.mkdir(parents=True, exist_ok=True)
    paths = [f"router/{name}.py" for name in native.MODULES]
    with tempfile.TemporaryDirectory(prefix="native-") as tmp:
        config = Path(tmp) / "mypy.ini"
        config.write_text(CONFIG)
        setup = Path(tmp) / "setup.py"
        setup.write_text(SETUP.format(args=["--config-file", str(config), *paths],
                                      target=str(build)))
        # From the checkout's root: the extension modules land beside the sources.
        result = subprocess.run(  # noqa: S603  (our own interpreter and script)
            [sys.executable, "-W", "ignore", str(setup), "build_ext", "--inplace",
             "--build-temp", str(build / "temp")],
            cwd=ROOT, capture_output=True, text=True, check=False,
            # Its own cache: scripts/test.sh runs mypy beside this build.
            env={**os.environ, "MYPY_CACHE_DIR": str(build / "mypy-cache")})
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-20_000:] + result.stderr[-20_000:])
        print("build_native: mypyc failed (output above)", file=sys.stderr)
        return 1
    native.STAMP.write_text(wanted)
    state = native.status()
    print(f"build_native: {len(native.built())} files in {time.monotonic() - started:.0f} s"
          f" ({state})")
    return 0 if state == "compiled" else 1


if __name__ == "__main__":
    sys.exit(main())
