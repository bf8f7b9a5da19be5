"""Fixtures of the runtime tests: the test CA and a running world (see world.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from sqlalchemy.orm import Session, sessionmaker

from tests.manifest.conftest import ca
from tests.runtime.world import World, runtime_world

__all__ = ["ca"]


@pytest.fixture
def world(db_url: str, sessions: sessionmaker[Session], tmp_path: Path,
          ca: trustme.CA) -> Iterator[World]:
    with runtime_world(db_url, sessions, tmp_path, ca) as running:
        yield running
