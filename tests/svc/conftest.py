"""The live CLI world shared by the CLI test modules: a real router on loopback, on
SQLite and PostgreSQL, with developer dev1 owning the app ``game``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from router.app import create_app
from tests.factories import add_developer, add_owned_app
from tests.support.router import router_settings
from tests.support.servers import serve_router
from tests.svc.test_cli_end_to_end import World


@pytest.fixture
def world(db_url: str, sessions: sessionmaker[Session], tmp_path: Path) -> Iterator[World]:
    developer_id, org_id = add_developer(sessions)
    add_owned_app(sessions, org_id, "game")
    settings = router_settings(db_url)
    settings = replace(settings, base_url=f"http://127.0.0.1:{settings.bind_port}")
    with serve_router(create_app(settings), settings) as url:
        yield World(url, settings.bind_port, sessions, developer_id, tmp_path)
