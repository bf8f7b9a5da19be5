"""Cached app lookups for the runtime host, misses included.

A steady stream of requests for one slug costs no database round trip: entries live
for a TTL, concurrent misses share one lookup, and the change bus drops entries as
soon as an app changes anywhere.

An entry in use is read again shortly before it expires (the last ``REFRESH_AHEAD`` of
its TTL), in the background, while it goes on being served: a busy host never sees its
entry expire, so its requests do not all stop once per TTL to wait for one lookup (the
proxy's p99, bench/proxy_bench.py). The refreshed entry expires one TTL after its lookup
started, so nothing older than the TTL is ever served.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from router.gating import RuntimeRoute
from router.invalidation import ALL

log = logging.getLogger(__name__)

Lookup = Callable[[str], RuntimeRoute | None]
# The share of the TTL, at its end, in which a used entry is refreshed in the background.
REFRESH_AHEAD = 0.25


class AppDirectory:
    def __init__(self, lookup: Lookup, ttl: Callable[[], float],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lookup = lookup
        self._ttl = ttl
        self._clock = clock
        # slug -> (expires at, refresh from, route)
        self._entries: dict[str, tuple[float, float, RuntimeRoute | None]] = {}
        self._inflight: dict[str, asyncio.Future[RuntimeRoute | None]] = {}
        self._refreshing: set[asyncio.Task[None]] = set()
        # Bumped by every invalidation; a lookup that started before one is not cached.
        self._generation = 0
        self.lookups = 0

    async def get(self, slug: str) -> RuntimeRoute | None:
        entry = self._fresh(slug)
        if entry is not None:
            return entry[2]
        pending = self._inflight.get(slug)
        if pending is not None:
            return await asyncio.shield(pending)
        return await self._load(slug, self._begin(slug))

    def _begin(self, slug: str) -> asyncio.Future[RuntimeRoute | None]:
        """Claim the lookup of ``slug``: from now on, callers wait for this one."""
        future: asyncio.Future[RuntimeRoute | None] = asyncio.get_running_loop().create_future()
        self._inflight[slug] = future
        return future

    async def _load(self, slug: str, future: asyncio.Future[RuntimeRoute | None]
                    ) -> RuntimeRoute | None:
        generation = self._generation
        started = self._clock()
        try:
            self.lookups += 1
            route = await asyncio.to_thread(self._lookup, slug)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it, nobody logs it as lost
            raise
        finally:
            self._inflight.pop(slug, None)
        if generation == self._generation:
            ttl = self._ttl()
            self._entries[slug] = (started + ttl, started + ttl * (1 - REFRESH_AHEAD), route)
        future.set_result(route)
        return route

    def _refresh(self, slug: str) -> None:
        """Read ``slug`` again in the background, unless a lookup is already running."""
        if slug in self._inflight:
            return
        task = asyncio.get_running_loop().create_task(self._quietly(slug, self._begin(slug)))
        self._refreshing.add(task)
        task.add_done_callback(self._refreshing.discard)

    async def _quietly(self, slug: str, future: asyncio.Future[RuntimeRoute | None]) -> None:
        try:
            await self._load(slug, future)
        except Exception as exc:  # the entry stays until it expires; then get() says why
            log.warning("app refresh failed for %s: %s", slug, type(exc).__name__)

    def cached(self, slug: str) -> RuntimeRoute | None:
        """The route held for ``slug`` while its entry is fresh; None when there is no
        fresh entry or the entry is an unknown slug. Never waits, never looks up: the
        protocol-level fast path (``router/fast_path.py``) serves only what this returns
        and leaves everything else, misses included, to :meth:`get`."""
        entry = self._fresh(slug)
        return None if entry is None else entry[2]

    def _fresh(self, slug: str) -> tuple[float, float, RuntimeRoute | None] | None:
        """``slug``'s entry while it is fresh (refreshed in the background near its end)."""
        entry = self._entries.get(slug)
        if entry is None:
            return None
        now = self._clock()
        if entry[0] <= now:
            return None
        if entry[1] <= now:
            self._refresh(slug)
        return entry

    def invalidate(self, slug: str) -> None:
        self._generation += 1
        if slug == ALL:
            self._entries.clear()
        else:
            self._entries.pop(slug, None)
