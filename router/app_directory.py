"""Cached app lookups for the runtime host, misses included.

A steady stream of requests for one slug costs no database round trip: entries live
for a TTL, concurrent misses share one lookup, and the change bus drops entries as
soon as an app changes anywhere.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from router.gating import RuntimeRoute
from router.invalidation import ALL

Lookup = Callable[[str], RuntimeRoute | None]


class AppDirectory:
    def __init__(self, lookup: Lookup, ttl: Callable[[], float],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lookup = lookup
        self._ttl = ttl
        self._clock = clock
        self._entries: dict[str, tuple[float, RuntimeRoute | None]] = {}
        self._inflight: dict[str, asyncio.Future[RuntimeRoute | None]] = {}
        # Bumped by every invalidation; a lookup that started before one is not cached.
        self._generation = 0
        self.lookups = 0

    async def get(self, slug: str) -> RuntimeRoute | None:
        entry = self._entries.get(slug)
        if entry is not None and entry[0] > self._clock():
            return entry[1]
        pending = self._inflight.get(slug)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[RuntimeRoute | None] = asyncio.get_running_loop().create_future()
        self._inflight[slug] = future
        generation = self._generation
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
            self._entries[slug] = (self._clock() + self._ttl(), route)
        future.set_result(route)
        return route

    def cached(self, slug: str) -> RuntimeRoute | None:
        """The route held for ``slug`` while its entry is fresh; None when there is no
        fresh entry or the entry is an unknown slug. Never waits, never looks up: the
        protocol-level fast path (``router/fast_path.py``) serves only what this returns
        and leaves everything else, misses included, to :meth:`get`."""
        entry = self._entries.get(slug)
        if entry is not None and entry[0] > self._clock():
            return entry[1]
        return None

    def invalidate(self, slug: str) -> None:
        self._generation += 1
        if slug == ALL:
            self._entries.clear()
        else:
            self._entries.pop(slug, None)
