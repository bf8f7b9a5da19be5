"""A config apply reaches the router like any other app change: every instance sees it
within the invalidation bound (docs/router.md, "Invalidation")."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.config.test_config_api import config
from tests.developer.test_api import World
from tests.factories import add_developer, add_owned_app
from tests.router.conftest import RouterFactory, RunningRouter
from tests.support.servers import AiohttpServer, answering
from tests.support.waits import wait_for

P = "/api/developer/config"


@pytest.fixture
def origin() -> Iterator[AiohttpServer]:
    with answering("served by the origin") as server:
        yield server


def _status(router: RunningRouter, slug: str) -> int:
    return httpx.get(router.url + "/", headers={"host": router.host(slug)},
                     timeout=5).status_code


def _status_is(router: RunningRouter, slug: str, status: int) -> bool:
    return _status(router, slug) == status


def test_a_runtime_origin_changed_by_config_closes_the_runtime_on_every_instance(
        start_router: RouterFactory, sessions: sessionmaker[Session], origin: AiohttpServer,
        redis_url: str) -> None:
    developer_id, org_id = add_developer(sessions)
    add_owned_app(sessions, org_id, "game", origin=origin.url)
    with start_router(redis_url=redis_url) as one, start_router(redis_url=redis_url) as two:
        for router in (one, two):  # both instances have the active route cached
            assert _status(router, "game") == 200
        document = config("game", runtime={"mode": "worker_quick_launch",
                                           "origin": "http://127.0.0.1:9"})
        with World(one, sessions, developer_id, org_id).console() as console:
            plan = console.post(f"{P}/plan", json={"config": document}).json()
            changed = {(o["resource"], o["op"]) for o in plan["ops"]}
            assert ("runtime", "update") in changed, plan["ops"]
            applied = console.post(f"{P}/apply", json={
                "config": document, "baseRevision": plan["baseRevision"],
                "planDigest": plan["digest"]})
            assert applied.status_code == 201, applied.text
        # A new origin must be verified again before it is served: closed everywhere.
        for router in (one, two):
            assert wait_for(partial(_status_is, router, "game", 503), 1.0) < 1.0
