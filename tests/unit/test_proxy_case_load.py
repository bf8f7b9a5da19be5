"""bench/proxy_cases.py's load generators against its own origins on loopback, for about a
second each: the paced client holds its rate and counts latency from when a request was
due, the WebSocket client gets every echo back, and wrk runs the POST script."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ops.cluster.processes import free_port
from tests.unit.test_proxy_case_figures import BENCH, bench_module

ROOT = BENCH.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


@contextmanager
def origin(kind: str, *args: str) -> Iterator[int]:
    port = free_port()
    with subprocess.Popen([sys.executable, str(BENCH / "case_origins.py"), kind, "--port",
                           str(port), *args], env=ENV) as proc:
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline and proc.poll() is None
                    time.sleep(0.05)
            yield port
        finally:
            proc.terminate()
            proc.wait(10)


def run_client(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(BENCH / "case_clients.py"), *args],
                          capture_output=True, text=True, timeout=60, env=ENV, check=True)
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_paced_client_holds_its_rate_and_sees_the_origins_delay() -> None:
    with origin("slow", "--delay", "0.05") as port:
        # 32 connections: room for 640 answers/s at the origin's 50 ms, so a busy box
        # (whose scheduler can hold an answer back) never leaves a due request nowhere to go.
        result = run_client("paced", "--port", str(port), "--host", "x", "--connections", "32",
                            "--rate", "100", "--duration", "1")
    assert result["sent"] == 100 and result["answered"] == 100
    assert result["errors"] == 0 and result["closed_by_server"] == 0
    assert 50 <= result["p50_ms"] < 500  # every answer waited the origin's 50 ms


def test_slow_origin_logs_each_request_arrival_when_stopped(tmp_path: Path) -> None:
    """``--arrivals`` (bench/case_profile.py ``arrivals``): one monotonic time per request,
    pipelined ones included, written when the origin gets SIGTERM."""
    log = tmp_path / "arrivals.txt"
    before = time.monotonic()
    with origin("slow", "--delay", "0", "--arrivals", str(log)) as port, \
            socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n" * 2)
        conn.sendall(b"GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answers = b""
        while chunk := conn.recv(65536):
            answers += chunk
    after = time.monotonic()
    assert answers.count(b"HTTP/1.1 200 OK") == 3
    times = [float(line) for line in log.read_text().split()]
    assert len(times) == 3
    assert before <= times[0] <= times[1] <= times[2] <= after


def test_websocket_client_gets_every_echo() -> None:
    with origin("ws") as port:
        result = run_client("ws", "--port", str(port), "--host", "x", "--connections", "4",
                            "--duration", "1")
    assert result["errors"] == 0 and result["first_error"] == ""
    assert result["messages"] > 100


def test_wrk_posts_the_json_body(tmp_path: Path) -> None:
    assert shutil.which("wrk"), "wrk is installed by scripts/install.sh"  # no skip: it fails
    runs = bench_module("case_runs")
    body = runs.post_body()
    assert len(body) == 16384 and json.loads(body)["items"]
    script = tmp_path / "post.lua"
    script.write_text(runs.lua_script(body))
    with origin("slow", "--delay", "0") as port:
        done = subprocess.run(["wrk", "-t1", "-c2", "-d1s", "--latency", "-s", str(script),
                               f"http://127.0.0.1:{port}/"], capture_output=True, text=True,
                              timeout=30, check=True)
    sample = bench_module("proxy_bench").parse_wrk(done.stdout)
    assert sample.requests > 10 and sample.errors == ""
    assert sample.bytes_per_request > 1024  # the origin's 1 KB answer to each POST
