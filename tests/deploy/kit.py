"""What the topology tests share: HTTPS clients through the edge and a steady load of
requests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from ops.cluster.topology import Cluster


def client(cluster: Cluster, name: str, **headers: str) -> httpx.Client:
    return httpx.Client(base_url=cluster.edge, verify=cluster.client_context(), timeout=15,
                        headers={"host": cluster.host(name), **headers})


@dataclass
class Load:
    """Threads sending one request after another until stopped; every answer kept."""

    send: Callable[[httpx.Client, int], httpx.Response]
    threads: int = 4
    seen: list[tuple[float, int, str]] = field(default_factory=list)  # (time, status, body)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)

    def start(self, make_client: Callable[[], httpx.Client]) -> Load:
        counter = iter(range(10**9))
        lock = threading.Lock()

        def run() -> None:
            with make_client() as http:
                while not self._stop.is_set():
                    with lock:
                        n = next(counter)
                    try:
                        answer = self.send(http, n)
                        self.seen.append((time.monotonic(), answer.status_code, answer.text))
                    except httpx.HTTPError as exc:
                        self.errors.append(f"{type(exc).__name__}: {exc}")
        self._workers = [threading.Thread(target=run, daemon=True)
                         for _ in range(self.threads)]
        for worker in self._workers:
            worker.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join(timeout=30)


def upstreams(cluster: Cluster, lines: list[str]) -> dict[str, int]:
    """Requests per instance (``host:port``) in nginx access log lines."""
    counts: dict[str, int] = {}
    for line in lines:
        parts = line.split()
        if len(parts) >= 4:
            counts[parts[3]] = counts.get(parts[3], 0) + 1
    return counts
