"""A value with a trailing newline is not the value.

Python's ``$`` also matches just before a final ``\\n``, so ``re.match(r"^0x...{40}$")``
took ``"0x...\\n"`` as an address: through config apply a ``payTo`` would have been stored
with the newline. Our patterns end in ``\\Z``; the last test keeps it that way.
"""

from __future__ import annotations

import re
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


def test_no_anchored_pattern_of_ours_ends_in_dollar() -> None:
    """``re.compile(r"^...$")`` is the shape that let the newline through."""
    found = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            for match in re.finditer(r're\.compile\(r?"(\^[^"]*)\$"', text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(ROOT)}:{line}")
    assert found == [], found
