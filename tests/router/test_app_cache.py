"""App lookups are cached (misses too) and changes reach every instance within 1 s."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from functools import partial

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from router.app_directory import AppDirectory
from router.gating import RuntimeRoute
from router.invalidation import publish_app_changed_sync
from tests.factories import add_app, update_app
from tests.router.conftest import RouterFactory, RunningRouter
from tests.support.servers import AiohttpServer, answering
from tests.support.waits import wait_for


@pytest.fixture
def origin() -> Iterator[AiohttpServer]:
    with answering("ok") as server:
        yield server


def status_of(router: RunningRouter, slug: str) -> int:
    return httpx.get(router.url + "/", headers={"host": router.host(slug)}, timeout=5).status_code


def _status_is(router: RunningRouter, slug: str, status: int) -> bool:
    return status_of(router, slug) == status


def test_steady_state_makes_no_database_round_trip(
    start_router: RouterFactory, sessions: sessionmaker[Session], origin: AiohttpServer,
    redis_url: str,
) -> None:
    add_app(sessions, "game", origin.url)
    with start_router(redis_url=redis_url) as router:
        directory = router.service.resources.app_directory()
        for _ in range(50):
            assert status_of(router, "game") == 200
        for _ in range(20):
            assert status_of(router, "ghost") == 404
        assert directory.lookups == 2  # one for "game", one for the miss "ghost"


def test_change_reaches_every_instance_within_one_second(
    start_router: RouterFactory, sessions: sessionmaker[Session], origin: AiohttpServer,
    redis_url: str,
) -> None:
    add_app(sessions, "game", origin.url)
    with start_router(redis_url=redis_url) as one, start_router(redis_url=redis_url) as two:
        assert status_of(one, "game") == 200 and status_of(two, "game") == 200
        assert status_of(one, "later") == 404 and status_of(two, "later") == 404
        # What svc-ops does: commit, then publish.
        update_app(sessions, "game", kill_switch=True)
        add_app(sessions, "later", origin.url)
        publish_app_changed_sync(redis_url, "game")
        publish_app_changed_sync(redis_url, "later")
        for router in (one, two):
            assert wait_for(partial(_status_is, router, "game", 503), 1.0) < 1.0
            assert wait_for(partial(_status_is, router, "later", 200), 1.0) < 1.0


def test_without_redis_entries_expire_within_one_second(
    start_router: RouterFactory, sessions: sessionmaker[Session], origin: AiohttpServer,
) -> None:
    add_app(sessions, "game", origin.url)
    with start_router() as router:
        assert status_of(router, "game") == 200
        update_app(sessions, "game", kill_switch=True)  # another process, no bus to tell us
        # The entry was filled before the change, so it is gone 1 s after it at the latest:
        # no request sent later may see it. (When a request is sent, not when its answer is
        # read: on a loaded box one request can take a few hundred ms.)
        changed = time.monotonic()
        seen: list[tuple[float, int]] = []
        while not seen or seen[-1][1] != 503:
            assert time.monotonic() - changed < 5, seen
            sent = time.monotonic() - changed
            seen.append((sent, status_of(router, "game")))
        stale = [sent for sent, status in seen if status == 200]
        assert not stale or max(stale) <= 1.1, seen


ROUTE = RuntimeRoute(app_id="zapp_x", slug="game", name="Game", origin="http://o",
                     app_status="active", runtime_status="active", domain_status="approved",
                     kill_switch=False, entry_path="/", app_path="/")


def test_concurrent_misses_share_one_lookup() -> None:
    calls: list[str] = []

    def lookup(slug: str) -> RuntimeRoute | None:
        calls.append(slug)
        time.sleep(0.05)
        return ROUTE

    async def main() -> None:
        directory = AppDirectory(lookup, ttl=lambda: 60.0)
        results = await asyncio.gather(*(directory.get("game") for _ in range(100)))
        assert all(r is ROUTE for r in results)

    asyncio.run(main())
    assert calls == ["game"]


def test_invalidation_during_lookup_is_not_cached() -> None:
    versions = iter(["old", "new"])

    def lookup(slug: str) -> RuntimeRoute | None:
        version = next(versions)
        time.sleep(0.05)
        return RuntimeRoute(**{**ROUTE.__dict__, "name": version})

    async def main() -> None:
        directory = AppDirectory(lookup, ttl=lambda: 60.0)
        pending = asyncio.create_task(directory.get("game"))
        await asyncio.sleep(0.01)
        directory.invalidate("game")  # the change landed while "old" was being read
        old = await pending
        assert old is not None and old.name == "old"
        fresh = await directory.get("game")
        assert fresh is not None and fresh.name == "new"

    asyncio.run(main())


def test_lookup_errors_reach_every_waiter_and_are_not_cached() -> None:
    attempts: list[int] = []

    def lookup(slug: str) -> RuntimeRoute | None:
        attempts.append(1)
        time.sleep(0.02)
        if len(attempts) == 1:
            raise RuntimeError("database down")
        return ROUTE

    async def main() -> None:
        directory = AppDirectory(lookup, ttl=lambda: 60.0)
        results = await asyncio.gather(*(directory.get("game") for _ in range(5)),
                                       return_exceptions=True)
        assert all(isinstance(r, RuntimeError) for r in results)
        assert await directory.get("game") is ROUTE

    asyncio.run(main())


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_entry_in_use_is_refreshed_before_it_expires() -> None:
    """In the last quarter of its TTL a used entry is read again in the background while
    it is still served, so a busy host never waits for a lookup; the new entry lives one
    TTL from its lookup's start, so nothing older than the TTL is served."""
    names = iter(["v1", "v2", "v3"])
    calls: list[float] = []
    clock = Clock()

    def lookup(slug: str) -> RuntimeRoute | None:
        calls.append(clock.now)
        return RuntimeRoute(**{**ROUTE.__dict__, "name": next(names)})

    async def served(directory: AppDirectory) -> str:
        route = await directory.get("game")
        assert route is not None
        return route.name

    def held(directory: AppDirectory) -> str | None:
        route = directory.cached("game")
        return None if route is None else route.name

    async def main() -> None:
        directory = AppDirectory(lookup, ttl=lambda: 1.0, clock=clock)
        assert await served(directory) == "v1" and calls == [100.0]
        clock.now = 100.7  # fresh, and not yet in the refresh window
        assert await served(directory) == "v1" and held(directory) == "v1"
        await asyncio.sleep(0.05)
        assert calls == [100.0]
        clock.now = 100.8  # the last quarter: served as is, read again behind it
        assert held(directory) == "v1" and await served(directory) == "v1"
        for _ in range(100):
            if held(directory) == "v2":
                break
            await asyncio.sleep(0.01)
        assert calls == [100.0, 100.8]  # one refresh for many requests
        clock.now = 101.5  # past v1's expiry: v2 (read at 100.8) is served without a wait
        assert await served(directory) == "v2" and len(calls) == 2
        clock.now = 101.9  # past v2's expiry with no request in its window: a plain miss
        assert held(directory) is None
        assert await directory.get("game") is not None and calls[-1] == 101.9

    asyncio.run(main())


def test_a_failed_refresh_keeps_the_entry_until_it_expires() -> None:
    clock = Clock()
    fail = [False]

    def lookup(slug: str) -> RuntimeRoute | None:
        if fail[0]:
            raise RuntimeError("database down")
        return ROUTE

    async def main() -> None:
        directory = AppDirectory(lookup, ttl=lambda: 1.0, clock=clock)
        assert await directory.get("game") is ROUTE
        fail[0] = True
        clock.now = 100.9
        assert directory.cached("game") is ROUTE  # starts the refresh, which fails
        await asyncio.sleep(0.05)
        assert directory.cached("game") is ROUTE
        clock.now = 101.0
        assert directory.cached("game") is None
        with pytest.raises(RuntimeError, match="database down"):
            await directory.get("game")

    asyncio.run(main())
