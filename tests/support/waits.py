"""Waiting for a condition in tests that talk to real servers."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker


def wait_for(predicate: Callable[[], bool], limit: float, what: str = "the condition",
             poll: float = 0.02) -> float:
    """Seconds until ``predicate`` held; fails the test after ``limit`` seconds."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > limit:
            pytest.fail(f"{what}: not within {limit} s")
        time.sleep(poll)
    return time.monotonic() - started


def wait_for_a_lock_wait(sessions: sessionmaker[Session], db_url: str,
                         what: str = "the second transaction") -> None:
    """Until another transaction waits on a row lock (PostgreSQL), so that a concurrency
    test knows its second writer is held by the first; SQLite's second writer waits at
    BEGIN IMMEDIATE whatever the code does, so there a short pause stands in."""
    if not db_url.startswith("postgresql"):
        time.sleep(0.3)
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with sessions() as probe:  # a new transaction each time: a fresh pg_stat_activity
            if probe.scalar(text("SELECT count(*) FROM pg_stat_activity WHERE "
                                 "wait_event_type = 'Lock' AND datname = current_database()")):
                return
        time.sleep(0.02)
    pytest.fail(f"{what} never waited on the first's lock")
