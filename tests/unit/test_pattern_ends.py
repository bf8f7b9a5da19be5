"""A value with a trailing newline is not the value.

Python's ``$`` also matches just before a final ``\\n``, so ``re.match(r"^0x...{40}$")``
took ``"0x...\\n"`` as an address: through config apply a ``payTo`` would have been stored
with the newline. Our patterns end in ``\\Z``; the last test keeps it that way.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from payments.apps import check_pay_to
from payments.errors import ApiError
from payments.ledger.permits import check_address
from payments.slugs import is_valid_slug

ROOT = Path(__file__).resolve().parents[2]
ADDRESS = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
PACKAGES = ("payments", "manifest", "portal", "router", "ops", "svc", "examples")


def test_an_address_with_a_newline_is_refused() -> None:
    assert check_pay_to(ADDRESS)
    with pytest.raises(ApiError):
        check_pay_to(ADDRESS + "\n")
    assert check_address(ADDRESS, "owner") == ADDRESS.lower()
    with pytest.raises(ApiError):
        check_address(ADDRESS + "\n", "owner")


def test_a_slug_with_a_newline_is_not_a_slug() -> None:
    assert is_valid_slug("game")
    assert not is_valid_slug("game\n")


def _pattern_tail(node: ast.expr) -> str | None:
    """The literal text a pattern argument ends with: a string, the last piece of an
    f-string, or the right side of a concatenation."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        return _pattern_tail(node.values[-1])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _pattern_tail(node.right)
    return None


def test_no_pattern_of_ours_ends_in_dollar() -> None:
    """``re.compile(r"...$")``, on one line or several, is the shape that let the newline
    through; ``$`` before a final ``\\n`` is never what these patterns mean."""
    found = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in ("compile", "match", "search")
                        and isinstance(node.func.value, ast.Name)
                        and node.func.value.id == "re" and node.args):
                    tail = _pattern_tail(node.args[0])
                    if tail is not None and tail.endswith("$"):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == [], found


def test_the_scan_sees_patterns_over_several_lines() -> None:
    tree = ast.parse('re.compile(\n    rf"^{x}"\n    r"\\.y$")')
    call = tree.body[0].value  # type: ignore[attr-defined]
    assert _pattern_tail(call.args[0]) == "\\.y$"
