"""USD (USDC) amounts and atomic units: 6 decimals, exact, never through a float.

The service speaks atomic units only (integer strings, spec 8 item 6); people type dollars.
Both directions are string and integer work, so ``0.1`` is exactly 100000 and a seventh
decimal is refused rather than rounded away.
"""

from __future__ import annotations

import re

DECIMALS = 6
ATOMIC_PER_USD = 10**DECIMALS
# The service stores amounts in signed 64-bit columns (payments.http.atomic_amount).
MAX_ATOMIC = 2**63 - 1

_USD = re.compile(r"([0-9]+)(?:\.([0-9]+))?", re.ASCII)
_ATOMIC = re.compile(r"[0-9]+", re.ASCII)


class AmountError(ValueError):
    """Input that is not an amount; the message says what to type instead."""


def usd_to_atomic(text: str) -> int:
    """``"0.05"`` -> 50000. Accepts digits with an optional point and up to 6 decimals."""
    raw = text.strip().removeprefix("$")
    if raw.startswith("-"):
        raise AmountError(f"'{text}' is negative; amounts are 0 or more.")
    match = _USD.fullmatch(raw)
    if match is None:
        raise AmountError(f"'{text}' is not a USD amount; write it like 0.05 or 12 "
                          "(digits, an optional point, at most 6 decimals).")
    whole, fraction = match.group(1), match.group(2) or ""
    if len(fraction) > DECIMALS:
        raise AmountError(f"'{text}' has {len(fraction)} decimals; USDC has {DECIMALS}, so "
                          "the smallest amount is 0.000001.")
    return _bounded(int(whole) * ATOMIC_PER_USD + int(fraction.ljust(DECIMALS, "0")), text)


def parse_atomic(text: str) -> int:
    """``"50000"`` -> 50000: a whole number of atomic units (1 USDC = 1000000)."""
    raw = text.strip()
    if raw.startswith("-"):
        raise AmountError(f"'{text}' is negative; amounts are 0 or more.")
    if _ATOMIC.fullmatch(raw) is None:
        raise AmountError(f"'{text}' is not a whole number of atomic units; write it like "
                          "50000 (= 0.05 USDC).")
    return _bounded(int(raw), text)


def is_atomic_text(text: str) -> bool:
    """``text`` is an amount as the service writes one: ASCII digits only (``str.isdigit``
    also says yes to "²", and ``int`` reads Arabic-Indic digits and "1_0")."""
    return _ATOMIC.fullmatch(text) is not None


def atomic_to_usd(atomic: int) -> str:
    """50000 -> ``"0.050000"``: always all 6 decimals, so the text is exact."""
    if atomic < 0:
        raise AmountError(f"{atomic} is negative; amounts are 0 or more.")
    whole, fraction = divmod(atomic, ATOMIC_PER_USD)
    return f"{whole}.{fraction:0{DECIMALS}d}"


def _bounded(atomic: int, text: str) -> int:
    if atomic > MAX_ATOMIC:
        raise AmountError(f"'{text}' is larger than the service accepts "
                          f"({atomic_to_usd(MAX_ATOMIC)} USDC).")
    return atomic
