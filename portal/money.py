"""USDC amounts for people: atomic units (6 decimals) written as decimal text."""

from __future__ import annotations


def format_usdc(atomic: int) -> str:
    """6-decimal atomic units as a USDC amount with at least two decimals: 10000 -> 0.01."""
    whole, frac = divmod(atomic, 1_000_000)
    digits = f"{frac:06d}".rstrip("0")
    return f"{whole}.{digits.ljust(2, '0')}"
