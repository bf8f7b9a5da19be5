"""Fixtures of the reference app tests; the browser ones come from tests/portal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.portal.conftest import browser, chrome  # noqa: F401 - fixtures re-used here
from tests.reference_app.world import RefWorld, reference_world, sqlite_store
from tests.support.router import RouterFactory


@pytest.fixture
def ref(start_router: RouterFactory, sessions: sessionmaker[Session],
        tmp_path: Path) -> Iterator[RefWorld]:
    """The world with the reference app on a SQLite store."""
    with reference_world(start_router, sessions, sqlite_store(tmp_path)) as world:
        yield world
