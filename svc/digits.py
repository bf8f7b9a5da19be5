"""Whole numbers written in text from outside (headers, files, answers), as in the service.

The SDK's copy of ``payments.digits`` (the SDK imports no server code): ``str.isdigit()``
is also true for "²", which ``int()`` refuses, and for other scripts' digits, which
``int()`` reads; ``int()`` alone takes " 10", "+10" and "1_0" as well.
"""

from __future__ import annotations


def is_digits(text: str) -> bool:
    """``text`` is one or more of the ASCII digits 0-9, and nothing else."""
    return text.isascii() and text.isdigit()


def parse_digits(text: str, max_digits: int) -> int | None:
    """``text`` as a whole number if it is 1 to ``max_digits`` ASCII digits, else None.

    The bound comes first: ``int()`` refuses more than 4300 digits with a ValueError.
    """
    if len(text) > max_digits or not is_digits(text):
        return None
    return int(text)
