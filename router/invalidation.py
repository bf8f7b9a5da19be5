"""Telling every router instance that an app changed.

In-process when there is no Redis (one instance; the cache TTL covers other
processes such as ``svc-ops``), Redis pub/sub when there is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

import redis
import redis.asyncio as aioredis

log = logging.getLogger(__name__)

CHANNEL = "svc:app-changed"
# An empty payload means "everything may have changed" (e.g. after a reconnect).
ALL = ""

Listener = Callable[[str], None]


class ChangeBus(Protocol):
    @property
    def connected(self) -> bool:
        """Whether changes made elsewhere reach us now (else caches must expire fast)."""
        ...

    async def publish(self, slug: str) -> None: ...
    def subscribe(self, listener: Listener) -> None: ...
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


class LocalChangeBus:
    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    @property
    def connected(self) -> bool:
        return False  # other processes (svc-ops) cannot reach an in-process bus

    async def publish(self, slug: str) -> None:
        for listener in self._listeners:
            listener(slug)

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


class RedisChangeBus:
    """Pub/sub on one channel; a dropped subscription clears every cache on reconnect."""

    def __init__(self, client: aioredis.Redis) -> None:
        self._client = client
        self._listeners: list[Listener] = []
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()

    @property
    def connected(self) -> bool:
        return self._subscribed.is_set()

    async def publish(self, slug: str) -> None:
        await self._client.publish(CHANNEL, slug)

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def _notify(self, slug: str) -> None:
        for listener in self._listeners:
            listener(slug)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen(), name="app-change-listener")
        try:
            await asyncio.wait_for(self._subscribed.wait(), timeout=2)
        except TimeoutError:
            log.warning("app-change subscription not ready yet; caches use their TTL")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _listen(self) -> None:
        delay = 0.1
        while True:
            try:
                async with self._client.pubsub() as pubsub:
                    await pubsub.subscribe(CHANNEL)
                    self._notify(ALL)  # anything published while we were away
                    self._subscribed.set()
                    delay = 0.1
                    async for message in pubsub.listen():
                        if message.get("type") == "message":
                            data = message["data"]
                            self._notify(data.decode() if isinstance(data, bytes) else data)
            except asyncio.CancelledError:
                raise
            except (redis.RedisError, OSError) as exc:
                if self._subscribed.is_set():
                    log.warning("app-change subscription lost (%s); retrying",
                                type(exc).__name__)
                self._subscribed.clear()
                self._notify(ALL)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)


def publish_app_changed_sync(redis_url: str | None, slug: str) -> None:
    """For processes outside the server (``svc-ops``): tell the routers after a commit."""
    if not redis_url:
        return
    client = redis.Redis.from_url(redis_url)
    try:
        client.publish(CHANNEL, slug)
    finally:
        client.close()
