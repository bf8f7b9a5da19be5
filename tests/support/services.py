"""Real PostgreSQL and Redis servers on loopback for the test session, each stopped by its
pid when the session ends. They are the local topology's own launchers (ops/cluster/), so
the tests run the servers exactly as `scripts/cluster.sh` does."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ops.cluster.processes import Processes, free_port, listeners, tcp_sockets
from ops.cluster.services import Postgres, Redis

__all__ = ["free_port", "listeners", "postgres_server", "redis_server", "tcp_sockets"]


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yield a superuser URL ``postgresql://postgres@127.0.0.1:PORT/postgres``."""
    server = Postgres(Path(tempfile.mkdtemp(prefix="svc-pg-")))
    try:
        server.init()
        server.start()
        yield server.url
    finally:
        server.stop()
        server.remove()


@contextmanager
def redis_server() -> Iterator[str]:
    procs = Processes()
    logs = Path(tempfile.mkdtemp(prefix="svc-redis-"))
    server = Redis(procs, logs)
    try:
        server.start()
        yield server.url
    finally:
        procs.stop_all()
        for log in logs.iterdir():
            log.unlink()
        logs.rmdir()
