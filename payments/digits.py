"""Whole numbers written in text from outside (query strings, JSON strings, headers).

Our wire numbers are ASCII decimal digits and nothing else. ``str.isdigit()`` is also true
for "²" (which ``int()`` then refuses: a 500 where a 422 was meant) and for the digits of
other scripts, such as Arabic-Indic U+0661 U+0660 (which ``int()`` reads as 10: another
spelling of an amount, silently accepted); ``int()`` alone takes " 10", "+10" and "1_0"
as well. Check with these instead.
"""

from __future__ import annotations


def is_digits(text: str) -> bool:
    """``text`` is one or more of the ASCII digits 0-9, and nothing else."""
    return text.isascii() and text.isdigit()


def parse_digits(text: str, max_digits: int) -> int | None:
    """``text`` as a whole number if it is 1 to ``max_digits`` ASCII digits, else None.

    The bound comes first: ``int()`` refuses more than 4300 digits with a ValueError, and
    no number of ours comes near that.
    """
    if len(text) > max_digits or not is_digits(text):
        return None
    return int(text)

