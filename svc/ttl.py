"""Grant lifetimes as people write them: ``90s``, ``30m``, ``2h``, ``7d``."""

from __future__ import annotations

import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_PATTERN = re.compile(r"([0-9]{1,7})([smhd])")  # \d matches any script's digits


def parse_ttl(text: str) -> int:
    """Seconds in ``text``; ``ValueError`` with a sentence a person can act on otherwise."""
    match = _PATTERN.fullmatch(text.strip().lower())
    if match is None or int(match.group(1)) == 0:
        raise ValueError(f"'{text}' is not a lifetime; write a positive whole number followed "
                         "by s, m, h or d, e.g. 90s, 30m, 2h or 7d")
    return int(match.group(1)) * _UNITS[match.group(2)]
