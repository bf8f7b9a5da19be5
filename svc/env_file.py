"""Reading a dotenv file (``KEY=value`` lines) without running anything in it.

Enough of the common format for the files ``svc export --format dotenv`` writes and people
edit: comments, blank lines, an optional ``export``, single or double quotes around a value.
"""

from __future__ import annotations

import re
from pathlib import Path

from svc.errors import usage

_LINE = re.compile(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)")


def parse_env(text: str, source: str = "env file") -> dict[str, str]:
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _LINE.fullmatch(stripped)
        if match is None:
            raise usage(f"{source} line {number} is not KEY=value.")
        values[match.group(1)] = _value(match.group(2))
    return values


def _value(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    # An unquoted value ends at a comment that follows whitespace, as in most dotenv tools.
    return re.split(r"\s+#", raw, maxsplit=1)[0].strip()


def read_env_file(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise usage(f"Cannot read the env file {path}: {exc.strerror or exc}") from exc
    return parse_env(text, str(path))
