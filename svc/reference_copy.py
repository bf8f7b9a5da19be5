"""The reference app's source files, found beside the installed SDK and copied into a new
project by ``svc init``.

The SDK and the reference app ship in one distribution, so wherever ``svc`` is installed,
``examples/reference_app`` is installed beside it at the same version: reading it there
needs no second copy kept in sync as package data. It is located with ``find_spec`` on the
top-level package, which executes nothing: the CLI never imports the app (it is server-side
code, tests/svc/test_boundary.py).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from svc.errors import CliError, ExitCode

SOURCE_PACKAGE = "examples.reference_app"
# The copy is a top-level package of the new project: `python -m reference_app`.
TARGET_PACKAGE = "reference_app"
SKIPPED_DIRS = frozenset({"__pycache__"})
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".db", ".sqlite")
# Text files whose absolute imports name the package; anything else is copied as bytes.
REWRITTEN_SUFFIXES = (".py", ".md", ".txt", ".toml")


@dataclass(frozen=True)
class SourceFile:
    relative: Path  # inside the package
    content: bytes


def reference_dir() -> Path:
    top, _, sub = SOURCE_PACKAGE.partition(".")
    spec = importlib.util.find_spec(top)
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / sub
        if (candidate / "__init__.py").is_file():
            return candidate
    raise CliError("The reference app's sources are not installed beside this svc "
                   f"({SOURCE_PACKAGE}); reinstall the SDK.", ExitCode.FAILED,
                   code="reference_app_missing")


def source_files(root: Path) -> list[SourceFile]:
    """Every file of the app, with ``examples.reference_app`` imports renamed."""
    found: list[SourceFile] = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if (not path.is_file() or SKIPPED_DIRS.intersection(relative.parts)
                or path.name.endswith(SKIPPED_SUFFIXES)):
            continue
        content = path.read_bytes()
        if path.suffix in REWRITTEN_SUFFIXES:
            content = content.replace(SOURCE_PACKAGE.encode(), TARGET_PACKAGE.encode())
        found.append(SourceFile(relative, content))
    return found
