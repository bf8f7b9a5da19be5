"""Real PostgreSQL and Redis servers on loopback for the test session.

PostgreSQL refuses to run as root, so as root its commands run as the ``postgres``
user on a data directory we create and own for it. Both are stopped by their pid.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"PostgreSQL's {name} not found: run scripts/install.sh")
    return path


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yield a superuser URL ``postgresql://postgres@127.0.0.1:PORT/postgres``."""
    root = Path(tempfile.mkdtemp(prefix="svc-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    root.chmod(0o755)
    port = free_port()
    subprocess.run(_as_postgres([_pg_bin("initdb"), "-D", str(data), "-A", "trust",
                                 "-U", "postgres", "--no-sync", "-E", "UTF8"]),
                   check=True, stdout=subprocess.DEVNULL)
    options = (f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
               "-c synchronous_commit=off -c full_page_writes=off -c max_connections=400")
    subprocess.run(_as_postgres([_pg_bin("pg_ctl"), "-D", str(data), "-o", options,
                                 "-l", str(root / "log"), "-w", "start"]),
                   check=True, stdout=subprocess.DEVNULL)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        pid_file = data / "postmaster.pid"
        if pid_file.exists():
            pid = int(pid_file.read_text().split()[0])
            os.kill(pid, 15)  # smart shutdown would wait for clients; SIGTERM is "fast"
            for _ in range(100):
                if not pid_file.exists():
                    break
                time.sleep(0.05)
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def redis_server() -> Iterator[str]:
    port = free_port()
    redis_bin = shutil.which("redis-server") or "/usr/bin/redis-server"
    proc = subprocess.Popen([redis_bin, "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def tcp_sockets(port: int) -> list[tuple[str, str]]:
    """(state, inode) of every IPv4 TCP socket whose local port is ``port``, from
    /proc/net/tcp (state ``0A`` listening, ``01`` established)."""
    found = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rsplit(":", 1)[1], 16) == port:
            found.append((fields[3], fields[9]))
    return found


def listeners(port: int) -> int:
    """How many sockets listen on ``port``."""
    return sum(1 for state, _ in tcp_sockets(port) if state == "0A")
