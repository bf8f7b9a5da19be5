"""Dotenv files (``KEY=value`` lines): reading one without running anything in it, and
updating one in place.

Enough of the common format for the files ``svc export --format dotenv`` writes and people
edit: comments, blank lines, an optional ``export``, single or double quotes around a value.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from svc.errors import usage

_LINE = re.compile(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)")
_ASSIGNMENT = re.compile(r"(\s*(?:export\s+)?)([A-Za-z_][A-Za-z0-9_]*)\s*=")  # for updating


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
    """The value of what follows ``=``, as written (spaces kept: they decide comments)."""
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    # An unquoted value ends at a comment that follows whitespace, as in most dotenv tools
    # and the shell: `KEY=   # note` is empty (svc init's template has such lines), while
    # `KEY=a#b` is `a#b`.
    return re.split(r"\s#", raw, maxsplit=1)[0].strip()


# What a shell reads as a plain word in ``NAME=value``: anything else is quoted, so that
# `. ./.env` (the quickstart's `set -a; . ./.env`) cannot run part of a value, as an
# unquoted `&` in a URL's query would.
_PLAIN = re.compile(r"[A-Za-z0-9_./:@%+=,?-]*\Z")


def assignment(name: str, value: str) -> str:
    """``NAME=value`` as a line both :func:`parse_env` and a POSIX shell read as ``value``."""
    if _PLAIN.match(value):
        return f"{name}={value}"
    if "'" not in value:
        return f"{name}='{value}'"
    if not any(c in value for c in '"$`\\\n'):
        return f'{name}="{value}"'
    raise usage(f"{name}'s value holds both a single quote and a character a double-quoted "
                "shell value would change; write it into the file by hand.")


def read_env_file(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise usage(f"Cannot read the env file {path}: {exc.strerror or exc}") from exc
    return parse_env(text, str(path))


@dataclass(frozen=True)
class Merged:
    text: str
    changed: list[str]  # variables whose value was replaced
    added: list[str]  # variables the file did not have, appended
    values: dict[str, str]  # each updated variable's value in ``text`` (its last line's)


def merge_env(current: str, update: dict[str, str], heading: str) -> Merged:
    """``current`` with each variable of ``update`` set, every other line kept as it was.

    An empty value in ``update`` means "not known here" (a secret, a store's URL): it
    fills a variable the file lacks but never empties one the file has. A variable given
    twice is set everywhere, as shells and dotenv tools disagree on which one counts.
    Variables the file lacks are appended under the comment ``heading``."""
    lines: list[str] = []
    changed: list[str] = []
    values: dict[str, str] = {}
    for line in current.splitlines():
        match = _ASSIGNMENT.match(line)
        if match is None or match.group(2) not in update:
            lines.append(line)
            continue
        prefix, name = match.groups()
        value, had = update[name], _value(line[match.end():])
        if value and value != had:
            lines.append(prefix + assignment(name, value))
            if name not in changed:
                changed.append(name)
        else:
            lines.append(line)
        values[name] = value or had
    added = [name for name in update if name not in values]
    if added:
        lines += ["", f"# {heading}", *(assignment(name, update[name]) for name in added)]
        values.update((name, update[name]) for name in added)
    return Merged("\n".join(lines) + "\n", changed, added, values)


def write_private(path: Path, text: str) -> None:
    """Write ``path`` readable by its owner only (0600), whole or not at all: it is where
    the developer keeps secrets, so it is never briefly readable by others, and a failed
    write does not leave half a file in its place."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)  # mkstemp makes it 0600 already; say so for the reader
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
