"""The one type of our commands' integer flags (``svc``, and the operator commands
``svc-server``, ``svc-ops`` and the cluster, which ship in the same distribution): ASCII
digits and nothing else.

argparse's ``type=int`` is ``int()``, which also reads other scripts' digits (Arabic-Indic
U+0665 is 5), fullwidth ones, " 5", "+5" and "1_0": a number spelled as the service never
spells one, sent on as if typed. Flags are text from outside, so they are read as the
service reads numbers (``svc.digits``, the SDK's copy of ``payments.digits``).
"""

from __future__ import annotations

import argparse

from svc.digits import parse_digits

MAX_DIGITS = 18  # below 2**63; every integer flag of ours is far smaller


def whole_number(text: str) -> int:
    """An integer flag's value, or the refusal argparse prints (exit 2) with the flag."""
    value = parse_digits(text, MAX_DIGITS)
    if value is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number: write it in ASCII digits 0-9 (at most "
            f"{MAX_DIGITS}), e.g. 20")
    return value
