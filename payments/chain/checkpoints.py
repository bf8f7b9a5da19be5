"""Named points inside the workers' steps, where tests inject a crash.

Production passes :func:`no_checkpoint`; a test passes a callable that raises at one name,
then starts a fresh worker to prove recovery from exactly that point.
"""

from __future__ import annotations

from collections.abc import Callable

Checkpoint = Callable[[str], None]


def no_checkpoint(point: str) -> None:
    """Nothing happens between steps in production."""
