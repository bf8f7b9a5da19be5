"""What becomes of connections queued to a server process that exits, in a network namespace
of its own (run as ``unshare -n python -m tests.router.accept_queue --db URL`` by
tests/router/test_processes.py; nothing here touches the machine's own network).

Inside the namespace: loopback up, Redis, and ``svc-server serve`` with three processes,
started with ``net.ipv4.tcp_migrate_req`` at 0 (the setting is the namespace's). Then at 0
and at 1 in turn, a process of the three is stopped (SIGSTOP: it accepts nothing),
connections are opened, each sending a request; those the others have not answered once
they fall idle for a second wait in the stopped one's accept queue. Then it is killed and
each waiting connection read to its end. (Three, so that a live one is left for the second
turn without waiting for the supervisor's replacement.) Prints, as JSON, for each setting
how many waited, how many of those got a 200 answer and how many were reset, and whether
the supervisor warned about the setting at start.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

from tests.router.test_processes import get, server_env, serving, workers_of
from tests.support.services import free_port, listeners, redis_server
from tests.support.waits import wait_for

CONNECTIONS = 64
SETTING = Path("/proc/sys/net/ipv4/tcp_migrate_req")


def request(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: api.localhost:{port}\r\n"
                 "Connection: close\r\n\r\n".encode())
    return sock


def outcome(sock: socket.socket) -> str:
    """'200', another status, 'reset', or 'closed' (no answer), reading to the end."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        return "reset"
    finally:
        sock.close()
    return data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/1.1 ") else "closed"


def kill_one_with_a_queue(port: int, victim: int) -> dict[str, object]:
    """Stop a process, queue connections on it, kill it; how they ended."""
    assert get(port, f"api.localhost:{port}", "/healthz")[0] == 200
    os.kill(victim, signal.SIGSTOP)
    socks = [request(port) for _ in range(CONNECTIONS)]
    answered, waiting = [], socks
    while True:  # until the live process has answered all it will (a second idle)
        readable, _, _ = select.select(waiting, [], [], 1.0)
        if not readable:
            break
        answered += [outcome(s) for s in readable]
        waiting = [s for s in waiting if s not in readable]
    os.kill(victim, signal.SIGKILL)
    ends = [outcome(s) for s in waiting]
    return {"answered_first": answered.count("200"), "waiting": len(waiting),
            "answered": ends.count("200"), "reset": ends.count("reset"),
            "other": sorted(e for e in ends if e not in ("200", "reset"))}


def run(db_url: str) -> dict[str, object]:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    SETTING.write_text("0")
    results: dict[str, object] = {}
    with redis_server() as redis_url, tempfile.TemporaryDirectory() as cwd:
        port = free_port()
        env = server_env(port, SVCSRV_DATABASE_URL=db_url, SVCSRV_REDIS_URL=redis_url,
                         SVCSRV_PROCESSES="3")
        with serving(env, Path(cwd)) as proc:
            wait_for(lambda: listeners(port) == 3 and len(workers_of(proc.pid)) == 3, 90,
                     "three processes listening")
            victims = sorted(workers_of(proc.pid))
            for setting, victim in zip(("0", "1"), victims, strict=False):
                SETTING.write_text(setting)
                results[setting] = kill_one_with_a_queue(port, victim)
            proc.send_signal(signal.SIGTERM)
            output, _ = proc.communicate(timeout=30)
    results["warned"] = "tcp_migrate_req is not 1" in output
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    options = parser.parse_args()
    print(json.dumps(run(options.db)))


if __name__ == "__main__":
    main()
