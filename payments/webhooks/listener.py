"""Waking a dispatcher from PostgreSQL ``NOTIFY svc_webhooks`` (see ``wakeup.NotifyOnCommit``):
for dispatchers that run apart from the servers that commit the events. A dropped connection
is reopened with backoff; meanwhile the poll interval still finds everything."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import psycopg

from payments.webhooks.wakeup import CHANNEL

log = logging.getLogger(__name__)


def libpq_url(database_url: str) -> str | None:
    """The URL for psycopg itself, or None when the database is not PostgreSQL."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if database_url.startswith(prefix):
            return "postgresql://" + database_url[len(prefix):]
    return None


class NotifyListener:
    def __init__(self, url: str, wake: Callable[[], None]) -> None:
        self._url = url
        self._wake = wake
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._listen(), name="webhook-listen")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _listen(self) -> None:
        delay = 0.5
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                        self._url, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    delay = 0.5
                    self._wake()  # anything committed while we were not listening
                    async for _ in conn.notifies():
                        self._wake()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database restarted or is unreachable
                log.warning("webhook LISTEN connection lost (%s); polling meanwhile",
                            type(exc).__name__)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
