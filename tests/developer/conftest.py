"""The developer API's world: one verified developer, an app "game", a running router."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.developer.test_api import World
from tests.factories import add_developer, add_owned_app
from tests.support.router import RouterFactory


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[World]:
    developer_id, org_id = add_developer(sessions)
    add_owned_app(sessions, org_id, "game")
    with start_router() as router:
        yield World(router, sessions, developer_id, org_id)
