"""The dispatcher: claims due attempts, sends them concurrently, records outcomes in batches.

One asyncio task claims (a thread runs each claim transaction), a task per request sends,
and one task records finished requests, many per transaction. It wakes when told (an
attempt was committed in this process, see ``wakeup.py``, or a manual retry) and otherwise
polls every ``poll_interval`` seconds for retries that came due and other processes' events.
Runs inside the server (``svc-server dev``/``serve``) or as ``svc-ops webhooks run``; any
number of them share one PostgreSQL database (``outbox.claim``).

A request starts only while its claim's lease still covers the whole request (timeout
included), so a second dispatcher that takes over an expired lease can never be sending the
same attempt at the same moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from sqlalchemy.orm import Session, sessionmaker

from payments.db import utcnow
from payments.webhooks import outbox
from payments.webhooks.outbox import Job, Result
from payments.webhooks.schedule import RetrySchedule
from payments.webhooks.sender import Sender, elapsed_ms
from payments.webhooks.signing_secrets import SecretBox

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class DispatchPolicy:
    poll_interval: float = 1.0
    batch_size: int = 200
    max_in_flight: int = 256
    # One receiver cannot take every slot: a hanging endpoint holds at most this many.
    per_endpoint: int = 64
    lease: float = 120.0
    retention: timedelta = timedelta(days=30)
    prune_every: float = 3600.0


class Dispatcher:
    def __init__(self, sessions: sessionmaker[Session], sender: Sender, box: SecretBox,
                 schedule: RetrySchedule | None = None, policy: DispatchPolicy | None = None,
                 clock: Callable[[], datetime] = utcnow) -> None:
        self.sessions = sessions
        self.sender = sender
        self.box = box
        self.schedule = schedule or RetrySchedule()
        self.policy = policy or DispatchPolicy()
        self.clock = clock
        self._secrets: dict[tuple[str, str], str] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._woken = asyncio.Event()
        self._stopping = asyncio.Event()
        self._results: asyncio.Queue[Result] = asyncio.Queue()
        self._sending: dict[asyncio.Task[None], Job] = {}
        self._per_endpoint: defaultdict[str, asyncio.Semaphore] = defaultdict(
            lambda: asyncio.Semaphore(self.policy.per_endpoint))
        self._tasks: list[asyncio.Task[None]] = []
        self._next_prune = 0.0

    # Control

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.sender.open()
        self._tasks = [self._loop.create_task(self._claim_loop(), name="webhook-claims"),
                       self._loop.create_task(self._record_loop(), name="webhook-records")]

    async def stop(self, grace: float = 2.0) -> None:
        """Stop claiming; give requests in flight ``grace`` seconds, give back the rest."""
        self._stopping.set()
        self._woken.set()
        if self._tasks:
            await self._tasks[0]
        if self._sending:
            unsent = dict(self._sending)
            _done, pending = await asyncio.wait(set(unsent), timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            with contextlib.suppress(Exception):  # else the lease gives them back later
                await self._db(lambda s: outbox.release(s, [unsent[t] for t in pending],
                                                        self.clock()))
        await self._results.join()
        if len(self._tasks) > 1:
            self._tasks[1].cancel()
            await asyncio.gather(self._tasks[1], return_exceptions=True)
        self._tasks = []
        await self.sender.close()

    def wake(self) -> None:
        """Look for due attempts now. Safe from any thread (commit hooks run on workers)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed in between
            loop.call_soon_threadsafe(self._woken.set)

    # Claiming

    async def _claim_loop(self) -> None:
        while not self._stopping.is_set():
            self._woken.clear()
            free = self.policy.max_in_flight - len(self._sending)
            wanted = min(free, self.policy.batch_size)
            jobs: list[Job] = []
            if wanted > 0:
                try:
                    jobs = await self._db(self._claim, wanted)
                except Exception:
                    log.exception("webhook claim failed")
                for job in jobs:
                    task = asyncio.get_running_loop().create_task(self._send(job))
                    self._sending[task] = job
                    task.add_done_callback(self._sent)
                await self._maybe_prune()
                if jobs and len(jobs) == wanted:
                    continue  # a full batch: more are probably due
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), self.policy.poll_interval)

    def _claim(self, session: Session, wanted: int) -> list[Job]:
        return outbox.claim(session, self.clock(), wanted,
                            timedelta(seconds=self.policy.lease), self.box, self._secrets)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sending.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("webhook send failed", exc_info=task.exception())
        if len(self._sending) == self.policy.max_in_flight - 1:
            self._woken.set()  # room again after being full

    # Sending

    async def _send(self, job: Job) -> None:
        async with self._per_endpoint[job.endpoint_id]:
            now = self.clock()
            # The request must end before the lease does (see the module docstring).
            if now + timedelta(seconds=self.sender.timeout + 5) > job.lease_until:
                return  # left for whoever claims it after the lease
            started = time.monotonic()
            outcome, signed = await self.sender.send(job, now)
            result = Result(job=job, outcome=outcome,
                            next=self.schedule.after(outcome, job.number, self.clock()),
                            sent_at=now, duration_ms=elapsed_ms(started), signed=signed)
        self._results.put_nowait(result)

    # Recording

    async def _record_loop(self) -> None:
        while True:
            batch = [await self._results.get()]
            while not self._results.empty():
                batch.append(self._results.get_nowait())
            try:
                if await self._db_retrying(self._finish, batch):
                    self._woken.set()  # rows queued behind these are due, committed now
            finally:
                for _ in batch:
                    self._results.task_done()

    def _finish(self, session: Session, batch: list[Result]) -> int:
        finished = outbox.finish(session, batch, self.clock())
        if finished.recorded < len(batch):
            log.warning("%d webhook outcome(s) not recorded: their claim was taken over",
                        len(batch) - finished.recorded)
        return finished.released

    async def _db_retrying(self, work: Callable[[Session, list[Result]], int],
                           batch: list[Result]) -> int:
        """Outcomes are retried until the database takes them (or the claim lapses and the
        attempt is sent again: at least once either way)."""
        delay = 0.1
        while True:
            try:
                return await self._db(work, batch)
            except Exception:
                log.exception("recording %d webhook outcome(s) failed; retrying", len(batch))
                if self._stopping.is_set():
                    return 0
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _maybe_prune(self) -> None:
        if time.monotonic() < self._next_prune:
            return
        self._next_prune = time.monotonic() + self.policy.prune_every
        try:
            await self._db(lambda s: outbox.prune_tries(s, self.clock() - self.policy.retention))
        except Exception:
            log.exception("pruning webhook tries failed")

    async def _db(self, work: Callable[..., T], *args: object) -> T:
        def unit() -> T:
            with self.sessions() as session, session.begin():
                return work(session, *args)
        return await asyncio.to_thread(unit)
