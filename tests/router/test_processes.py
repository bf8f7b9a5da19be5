"""``svc-server serve`` with ``SVCSRV_PROCESSES`` > 1: the command run as an operator would,
each process a real server listening on the same port, sharing Redis and the database."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from router.invalidation import publish_app_changed_sync
from tests.factories import add_app, update_app
from tests.support.servers import AiohttpServer, answering
from tests.support.services import free_port, listeners
from tests.support.waits import wait_for

SVC_SERVER = str(Path(sys.executable).with_name("svc-server"))
# A JSON-RPC chain no process can reach (no relayer key: nothing is signed); the proxy never
# touches the chain, and the in-process EVM is refused with more than one process.
CHAIN = {"SVCSRV_CHAIN_BACKEND": "json_rpc", "SVCSRV_CHAIN_RPC_URL": "http://127.0.0.1:9",
         "SVCSRV_SPENDER_ADDRESS": "0x" + "11" * 20, "SVCSRV_CHAIN_WORKERS": "false"}


def server_env(port: int, **values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SVCSRV_")}
    base = f"localhost:{port}"
    env.update({
        "SVCSRV_BIND_PORT": str(port), "SVCSRV_APPS_PORT": str(port),
        "SVCSRV_BASE_URL": f"http://api.{base}", "SVCSRV_PORTAL_URL": f"http://portal.{base}",
        "SVCSRV_CONSOLE_URL": f"http://console.{base}",
        "SVCSRV_DOCS_URL": f"http://docs.{base}", "SVCSRV_WEBHOOK_WORKERS": "false",
        **CHAIN, **values,
    })
    return env


def get(port: int, host: str, path: str = "/") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path, headers={"Host": host})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def workers_of(parent: int) -> set[int]:
    """The live processes ``parent`` spawned with multiprocessing."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == parent and fields[0] != "Z" and b"spawn_main" in cmdline:
            found.add(int(stat.parent.name))
    return found


def exited(pid: int) -> bool:
    """Reaped by its parent. (A zombie is not enough: the main thread of a process is a
    zombie while its other threads may still hold its files, the listening socket too.)"""
    return not Path(f"/proc/{pid}").exists()


def connections_held(pids: set[int], port: int, peers: set[int]) -> dict[int, int]:
    """How many established connections to ``port`` from the client ports ``peers`` each
    process holds (from /proc). Only the peers: an earlier probe's connection may still be
    established on the server's side for a moment after the client closed it."""
    inodes: dict[str, int] = {}
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes[target[8:-1]] = pid
    held = dict.fromkeys(pids, 0)
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = (int(f.rsplit(":", 1)[1], 16) for f in fields[1:3])
        state, inode = fields[3], fields[9]
        if local == port and remote in peers and state == "01" and inode in inodes:
            held[inodes[inode]] += 1  # ESTABLISHED, one of ours
    return held


@contextmanager
def serving(env: dict[str, str], cwd: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([SVC_SERVER, "serve"], env=env, cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        # Named first: once their parent is gone they are no longer its children.
        workers = workers_of(proc.pid)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        # The workers share our session; a parent killed above must not leave them behind.
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):  # most ended with their parent
                os.kill(pid, signal.SIGKILL)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture
def origin() -> Iterator[AiohttpServer]:
    with answering("from origin") as server:
        yield server


def test_processes_serve_share_changes_and_are_replaced(
    db_url: str, sessions: sessionmaker[Session], redis_url: str, origin: AiohttpServer,
    tmp_path: Path,
) -> None:
    add_app(sessions, "game", origin.url)
    port = free_port()
    host = f"game.apps.localhost:{port}"
    env = server_env(port, SVCSRV_DATABASE_URL=db_url, SVCSRV_REDIS_URL=redis_url,
                     SVCSRV_PROCESSES="2")
    with serving(env, tmp_path) as proc:
        wait_for(lambda: proc.poll() is not None or len(workers_of(proc.pid)) == 2, 30,
                 "two worker processes")
        assert proc.poll() is None, proc.communicate()[0]

        def served() -> bool:
            try:
                return get(port, host) == (200, b"from origin")
            except OSError:
                return False

        wait_for(served, 60, "the runtime is proxied")
        # A process listens once its service has started (until then the kernel sends it
        # nothing); then the kernel spreads connections over the processes (each listens in
        # the port's SO_REUSEPORT group). A burst all on one of them is what sharing one
        # socket gave.
        wait_for(lambda: listeners(port) == 2, 60, "both processes listening")
        clients = [http.client.HTTPConnection("127.0.0.1", port, timeout=5) for _ in range(32)]
        for client in clients:
            client.request("GET", "/", headers={"Host": host})
            assert client.getresponse().read() == b"from origin"
        peers = {client.sock.getsockname()[1] for client in clients if client.sock}
        assert len(peers) == 32  # each still connected (kept alive)
        held = connections_held(workers_of(proc.pid), port, peers)
        for client in clients:
            client.close()
        assert sum(held.values()) == 32
        assert all(count >= 4 for count in held.values()), held
        # Every process warms its cache; a change published through Redis reaches them all
        # within a second (spec: every instance), which fresh connections, handed to
        # whichever process accepts them, must all show.
        for _ in range(40):
            assert get(port, host) == (200, b"from origin")
        update_app(sessions, "game", kill_switch=True)
        publish_app_changed_sync(redis_url, "game")
        wait_for(lambda: all(get(port, host)[0] == 503 for _ in range(20)), 1.5,
                 "the kill switch on every connection")
        update_app(sessions, "game", kill_switch=False)
        publish_app_changed_sync(redis_url, "game")
        wait_for(lambda: all(get(port, host)[0] == 200 for _ in range(20)), 1.5,
                 "the app back on every connection")

        # A worker that dies is replaced; the other keeps answering meanwhile. (Its open
        # connections are reset with it; those in its accept queue too, unless the kernel
        # migrates them: the last test; it stops sending it new ones once its socket closes.)
        first = workers_of(proc.pid)
        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: exited(victim), 10, "the killed worker is gone")
        assert get(port, host) == (200, b"from origin")
        wait_for(lambda: len(workers_of(proc.pid) - {victim}) == 2, 30, "a replacement worker")
        # One that dies young (here: at once) is replaced after a growing delay (1 s, then
        # 2 s...), not in a tight loop.
        young = next(iter(workers_of(proc.pid) - first))
        os.kill(young, signal.SIGKILL)
        wait_for(lambda: exited(young), 10, "the young worker is gone")
        gone_at = time.monotonic()
        wait_for(lambda: len(workers_of(proc.pid)) == 2, 30, "its replacement")
        assert time.monotonic() - gone_at >= 0.9  # at least the 1 s delay, less polling
        # Just started, it imports and starts the service before it listens: the port has
        # one listener, and no connection waits on the newcomer meanwhile.
        assert listeners(port) == 1
        wait_for(served, 60, "served after the replacement")

        workers = workers_of(proc.pid)
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, output
    assert all(exited(pid) for pid in workers)
    assert "Traceback" not in output
    assert "starting another in " in output  # the delayed restart, in the log


def test_processes_stop_when_the_supervisor_is_killed(
    redis_url: str, sqlite_template: Path, origin: AiohttpServer, tmp_path: Path,
) -> None:
    """A supervisor killed with SIGKILL must not leave processes behind on the port (the
    next deployment would join them in the SO_REUSEPORT group)."""
    database = tmp_path / "svc.db"
    shutil.copy(sqlite_template, database)
    port = free_port()
    env = server_env(port, SVCSRV_DATABASE_URL=f"sqlite:///{database}",
                     SVCSRV_REDIS_URL=redis_url, SVCSRV_PROCESSES="2")
    with serving(env, tmp_path) as proc:
        wait_for(lambda: proc.poll() is not None or len(workers_of(proc.pid)) == 2, 30,
                 "two worker processes")
        workers = workers_of(proc.pid)
        wait_for(lambda: listening(port), 60, "listening")
        proc.kill()
        proc.wait(timeout=10)
        # Orphans are re-parented, so look them up by pid: each must end by itself.
        wait_for(lambda: not any(Path(f"/proc/{pid}").exists()
                              and b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
                              for pid in workers), 30, "the orphaned processes exit")
    assert not listening(port)


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_workers_that_cannot_start_stop_the_server(
    sqlite_template: Path, redis_url: str, tmp_path: Path,
) -> None:
    """Production refuses an old schema; with several processes that must end the command
    with an error, not restart workers forever."""
    empty = tmp_path / "empty.db"
    empty.touch()
    port = free_port()
    env = server_env(
        port, SVCSRV_DATABASE_URL=f"sqlite:///{empty}", SVCSRV_REDIS_URL=redis_url,
        SVCSRV_PROCESSES="2", SVCSRV_MODE="production", SVCSRV_APPS_SCHEME="https",
        SVCSRV_BASE_URL="https://api.example.test", SVCSRV_PORTAL_URL="https://example.test",
        SVCSRV_CONSOLE_URL="https://console.example.test",
        SVCSRV_DOCS_URL="https://docs.example.test", SVCSRV_SMTP_HOST="127.0.0.1",
        SVCSRV_SECRET_KEY="k" * 40, SVCSRV_BIND_HOST="127.0.0.1",
    )
    with serving(env, tmp_path) as proc:
        output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 3, output
    assert "svc-ops migrate" in output


def test_a_port_in_use_stops_the_server(redis_url: str, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = server_env(port, SVCSRV_DATABASE_URL=f"sqlite:///{tmp_path / 'svc.db'}",
                         SVCSRV_REDIS_URL=redis_url, SVCSRV_PROCESSES="2")
        done = subprocess.run([SVC_SERVER, "serve"], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3
    assert f"cannot bind 127.0.0.1:{port}" in done.stderr


@pytest.mark.parametrize(("values", "named"), [
    ({"SVCSRV_CHAIN_BACKEND": "in_process"}, "SVCSRV_REDIS_URL"),
    ({"SVCSRV_REDIS_URL": "redis://127.0.0.1:1/0", "SVCSRV_CHAIN_BACKEND": "in_process"},
     "SVCSRV_CHAIN_BACKEND=json_rpc"),
    ({"SVCSRV_REDIS_URL": "redis://127.0.0.1:1/0", "SVCSRV_CHAIN_WORKERS": "true"},
     "SVCSRV_CHAIN_WORKERS=false"),
])
def test_processes_without_shared_state_are_refused(
    values: dict[str, str], named: str, tmp_path: Path,
) -> None:
    env = server_env(free_port(), SVCSRV_PROCESSES="2",
                     SVCSRV_DATABASE_URL=f"sqlite:///{tmp_path / 'svc.db'}", **values)
    done = subprocess.run([SVC_SERVER, "serve"], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert named in done.stderr
    assert "SVCSRV_PROCESSES=2 needs" in done.stderr
    assert not (tmp_path / "svc.db").exists()  # refused before anything was touched


def test_connections_queued_to_a_process_that_exits_go_to_the_other(
        sqlite_template: Path, tmp_path: Path) -> None:
    """With ``net.ipv4.tcp_migrate_req`` 1 the connections waiting in a killed process's
    accept queue are answered by the other; at 0 (the kernel's default) they are reset, and
    the parent warned at start. In a network namespace of its own (``unshare -n``: the
    setting is the namespace's, the machine's stays as it is)."""
    shutil.copy(sqlite_template, tmp_path / "svc.db")
    done = subprocess.run(
        ["unshare", "-n", sys.executable, "-m", "tests.router.accept_queue",
         "--db", f"sqlite:///{tmp_path / 'svc.db'}"],
        cwd=Path(__file__).parents[2], text=True, capture_output=True, timeout=240,
        check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    reset, migrated = results["0"], results["1"]
    for result in (reset, migrated):
        assert result["answered_first"] >= 1 and result["waiting"] >= 1, result
    assert (reset["answered"], reset["reset"]) == (0, reset["waiting"]), reset
    assert (migrated["answered"], migrated["reset"], migrated["other"]) == (
        migrated["waiting"], 0, []), migrated
    assert results["warned"]
