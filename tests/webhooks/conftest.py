"""Fixtures most webhook tests share: a payment world whose dispatcher retries fast, and a
loopback receiver whose answers the test scripts. A module that needs another shape of
either (chain workers on, an endpoint made up front) defines its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.ledger.flow import PayWorld, build_world
from tests.support.router import RouterFactory
from tests.webhooks.kit import FAST, FaultyReceiver, receiver


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[PayWorld]:
    # Eight requests per event (the schedule's length) with short delays; 1 s timeout.
    with start_router(**FAST) as router:
        yield build_world(router, sessions)


@pytest.fixture
def hook() -> Iterator[FaultyReceiver]:
    with receiver() as faulty:
        yield faulty
