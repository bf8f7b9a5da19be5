"""Waiting for a condition in tests that talk to real servers."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest


def wait_for(predicate: Callable[[], bool], limit: float, what: str = "the condition",
             poll: float = 0.02) -> float:
    """Seconds until ``predicate`` held; fails the test after ``limit`` seconds."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > limit:
            pytest.fail(f"{what}: not within {limit} s")
        time.sleep(poll)
    return time.monotonic() - started
