"""Real parallel HTTP clients for concurrency tests.

Each worker thread owns its own ``httpx.Client`` (its own connection), and all workers
wait on a barrier before their first request, so the calls really overlap at the server.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import httpx

from tests.ledger.flow import PayWorld

T = TypeVar("T")

# Building an SSL context per client costs ~20 ms of CPU; the loopback server speaks plain
# HTTP, so one shared context keeps 200 clients cheap.
_SSL = ssl.create_default_context()


def client_for(world: PayWorld, **headers: str) -> httpx.Client:
    return httpx.Client(base_url=world.router.url, timeout=90, verify=_SSL, headers={
        "host": f"api.localhost:{world.router.port}", **headers})


def run_parallel(world: PayWorld, jobs: Sequence[Callable[[httpx.Client], T]], *,
                 workers: int, **headers: str) -> list[T]:
    """Run every job once on ``workers`` threads, each with its own client; results in
    job order. An exception in any job is raised here."""
    workers = min(workers, len(jobs))
    barrier = threading.Barrier(workers)
    lock = threading.Lock()
    pending = iter(enumerate(jobs))
    results: dict[int, T] = {}

    def worker() -> None:
        with client_for(world, **headers) as client:
            barrier.wait(timeout=60)
            while True:
                with lock:
                    nxt = next(pending, None)
                if nxt is None:
                    return
                index, job = nxt
                results[index] = job(client)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(worker) for _ in range(workers)]
        for future in futures:
            future.result()
    return [results[i] for i in range(len(jobs))]
