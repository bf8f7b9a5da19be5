"""Numbers from outside are ASCII digits: no ``\\d`` in our patterns, no ``str.isdigit()``.

In a str pattern ``\\d`` matches every script's decimal digits (Arabic-Indic, fullwidth,
...), and ``str.isdigit()`` says yes to those and to "²" as well: ``int()`` refuses "²" (a
ValueError where a clear refusal was meant) and reads the others as numbers spelled in a
way our wire never is. Patterns say ``[0-9]``; text is checked with ``payments.digits`` or,
in the SDK and the reference app (which import no server code), ``svc.digits``; the
``svc`` CLI's integer flags, and the operator commands', with ``svc.int_flags.whole_number``,
not argparse's ``type=int`` (which is ``int()``). These tests walk every module of ours to
keep it that way.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("payments", "manifest", "portal", "router", "ops", "svc", "examples")
DIGIT_CHECKS = ("isdigit", "isdecimal", "isnumeric")

# Where a digit check may stay, by file and function. Keep it this short.
ALLOWED = {
    # The helpers themselves: isascii() comes first.
    "payments/digits.py::is_digits",
    "svc/digits.py::is_digits",
    # bytes.isdigit() is ASCII-only: a request's and a response's Content-Length, held as
    # bytes on the compiled fast path.
    "router/fast_protocol.py::FastProtocol._next",
    "router/server_protocol.py::frame_whole",
}


def _sources() -> Iterator[tuple[str, ast.Module]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "node_modules" not in path.parts:
                yield (str(path.relative_to(ROOT)),
                       ast.parse(path.read_text(encoding="utf-8")))


def has_digit_class(pattern: str) -> bool:
    """``pattern`` holds the escape ``\\d`` (not an escaped backslash followed by "d")."""
    escaped = False
    for char in pattern:
        if escaped and char == "d":
            return True
        escaped = not escaped and char == "\\"
    return False


def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def digit_patterns(tree: ast.Module) -> list[int]:
    """Lines of string literals holding ``\\d``. Every literal counts, since a pattern may
    sit in a constant or a ``pattern=`` argument before it reaches ``re``; docstrings do
    not, and bytes do not (a bytes pattern's ``\\d`` is ASCII-only)."""
    skip = _docstrings(tree)
    return sorted(node.lineno for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and id(node) not in skip and has_digit_class(node.value))


def digit_checks(tree: ast.Module) -> list[tuple[str, int]]:
    """(enclosing function's qualified name, line) of each ``.isdigit`` and kin, called or
    passed along (``map(str.isdigit, ...)``)."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                inner = f"{scope}.{child.name}" if scope else child.name
            elif isinstance(child, ast.Attribute) and child.attr in DIGIT_CHECKS:
                found.append((scope, child.lineno))
            visit(child, inner)
    visit(tree, "")
    return found


def int_flags(tree: ast.Module) -> list[int]:
    """Lines of calls given ``type=int`` (an argparse flag read with ``int()``)."""
    return sorted(node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
                  and any(k.arg == "type" and isinstance(k.value, ast.Name)
                          and k.value.id == "int" for k in node.keywords))


def _schema_patterns(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "pattern" and isinstance(item, str):
                yield item
            elif key == "patternProperties" and isinstance(item, dict):
                yield from item
            yield from _schema_patterns(item)
    elif isinstance(value, list):
        for item in value:
            yield from _schema_patterns(item)


def test_no_pattern_of_ours_uses_backslash_d() -> None:
    found = [f"{path}:{line}" for path, tree in _sources() for line in digit_patterns(tree)]
    assert found == [], f"write [0-9] instead of \\d: {found}"


def test_no_schema_of_ours_uses_backslash_d() -> None:
    """jsonschema checks ``pattern`` with Python's ``re``, so the same rule applies."""
    schemas = [path for package in PACKAGES for path in (ROOT / package).rglob("*.schema.json")]
    assert len(schemas) >= 3  # the walk really found them
    found = [f"{path.relative_to(ROOT)}: {pattern}" for path in schemas
             for pattern in _schema_patterns(json.loads(path.read_text(encoding="utf-8")))
             if has_digit_class(pattern)]
    assert found == [], found


def test_digits_are_checked_only_by_the_helpers() -> None:
    seen, found = set(), []
    for path, tree in _sources():
        for scope, line in digit_checks(tree):
            seen.add(f"{path}::{scope}")
            if f"{path}::{scope}" not in ALLOWED:
                found.append(f"{path}:{line} ({scope or 'module'})")
    assert found == [], f"use payments.digits or svc.digits: {found}"
    assert seen == ALLOWED  # an entry no longer needed goes


def test_the_scan_reads_patterns_as_re_does() -> None:
    assert has_digit_class(r"^[1-9]\d*\Z") and has_digit_class(r"[\d.]")
    assert not has_digit_class(r"\\d") and not has_digit_class("[0-9]+")
    assert has_digit_class(r"\\\d")
    tree = ast.parse('"""Docs may say \\\\d."""\n'
                     'A = re.compile(r"^x"\n    r":\\d{1,5}")\nB = rb"\\d"\n'
                     'C = _str(9, pattern=r"\\d")\nD = rf"^{x}:\\d"\n')
    assert digit_patterns(tree) == [2, 5, 6]


def test_the_scan_finds_digit_checks_called_or_passed() -> None:
    tree = ast.parse("class A:\n    def f(self, t):\n        return t.isnumeric()\n"
                     "ok = all(map(str.isdecimal, parts))\n")
    assert digit_checks(tree) == [("A.f", 3), ("", 4)]


def test_the_clis_read_integer_flags_as_ascii_digits() -> None:
    """The svc CLI's flags, and the operator commands' (svc-server, svc-ops, the cluster)."""
    found = [f"{path}:{line}" for path, tree in _sources() for line in int_flags(tree)]
    assert found == [], f"type=svc.int_flags.whole_number, not type=int: {found}"


def test_the_scan_finds_int_flags() -> None:
    tree = ast.parse('p.add_argument("--n", type=int)\np.add_argument("--m", type=number)\n'
                     'q.add_argument(\n    "--k", default=1, type=int)\n')
    assert int_flags(tree) == [1, 3]
