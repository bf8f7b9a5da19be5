"""How the topology starts its server instances (ops/cluster/topology.py): all at once,
then waiting for all, and when one fails, saying which and leaving nothing running.

A stand-in `svc-server` takes the real one's place (BIN): the question is the launcher's
order and its failure handling, not the server, which tests/deploy/test_topology.py runs.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ops.cluster import topology
from ops.cluster.processes import Awaited, Proc, free_port, wait_all
from ops.cluster.topology import Cluster, Options

# Touches its port in the rendezvous directory, then serves only once every instance has
# done the same: an instance launched alone (the others waiting for it to serve first)
# gives up and exits. FAIL makes it exit at once; DELAY holds it before it listens.
STAND_IN = """\
import http.server, os, pathlib, sys, time

port = int(os.environ["SVCSRV_BIND_PORT"])
rendezvous = pathlib.Path(os.environ["RENDEZVOUS"])
(rendezvous / str(port)).touch()
if os.environ.get("FAIL"):
    sys.exit("refusing to start: FAIL is set")
deadline = time.monotonic() + 15
while len(list(rendezvous.iterdir())) < int(os.environ["INSTANCES"]):
    if time.monotonic() > deadline:
        sys.exit("launched alone: the other instances never started")
    time.sleep(0.05)
time.sleep(float(os.environ.get("DELAY", "0")))


class Healthy(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


http.server.HTTPServer(("127.0.0.1", port), Healthy).serve_forever()
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A BIN whose `svc-server` is the stand-in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    server = bin_dir / "svc-server"
    server.write_text(f"#!{sys.executable}\n{STAND_IN}")
    server.chmod(0o755)
    monkeypatch.setattr(topology, "BIN", bin_dir)
    return bin_dir


def cluster_of(root: Path, per_instance: dict[int, dict[str, str]]) -> Cluster:
    """A topology whose instances alone are started, each with the stand-in's environment
    and ``per_instance[index]`` (PostgreSQL, the chain and the rest are never started)."""
    cluster = Cluster(Options(root=root, edge_port=free_port(), processes=1))
    rendezvous = root / "rendezvous"
    rendezvous.mkdir(parents=True)
    ports = [instance.port for instance in cluster.instances]

    def server_env(port: int) -> dict[str, str]:
        return {"PATH": os.environ["PATH"], "SVCSRV_BIND_PORT": str(port),
                "RENDEZVOUS": str(rendezvous), "INSTANCES": str(len(ports)),
                **per_instance.get(ports.index(port), {})}

    cluster.server_env = server_env  # type: ignore[method-assign]
    return cluster


@pytest.fixture
def made(tmp_path: Path, stand_in: Path) -> Iterator[list[Cluster]]:
    """The clusters a test makes, stopped after it whatever happened."""
    clusters: list[Cluster] = []
    yield clusters
    for cluster in clusters:
        cluster.stop()


def launched_by(cluster: Cluster) -> list[Proc]:
    """Every process ``cluster`` starts from now on, kept even once it forgets them."""
    launched: list[Proc] = []
    start = cluster.procs.start

    def recording(*args: Any, **kwargs: Any) -> Proc:
        launched.append(start(*args, **kwargs))
        return launched[-1]

    cluster.procs.start = recording  # type: ignore[method-assign]
    return launched


def gone(proc: Proc) -> bool:
    """Whether ``proc`` and everything in its process group have exited."""
    if proc.alive():
        return False
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_instances_start_together(made: list[Cluster], tmp_path: Path) -> None:
    # Each instance waits for the other before it serves: one launched only after the first
    # served would leave the first waiting, and it gives up.
    cluster = cluster_of(tmp_path / "cluster", {})
    made.append(cluster)
    cluster.start_instances()
    assert all(i.proc is not None and i.proc.alive() for i in cluster.instances)
    assert [p.name for p in cluster.procs.procs] == ["server-1", "server-2"]


def test_an_instance_that_fails_is_named_and_nothing_is_left_running(
        made: list[Cluster], tmp_path: Path) -> None:
    # server-1 is slow to listen (30 s); server-2 exits at once. The start fails on
    # server-2's exit, not after waiting for server-1, and stops server-1 too.
    cluster = cluster_of(tmp_path / "cluster", {0: {"DELAY": "30"}, 1: {"FAIL": "1"}})
    made.append(cluster)
    launched = launched_by(cluster)
    started = time.monotonic()
    with pytest.raises(RuntimeError) as failed:
        cluster.start_instances()
    assert time.monotonic() - started < 15
    message = str(failed.value)
    assert re.match(r"server-2 exited \(1\) before server-2 serving:", message), message
    assert "refusing to start: FAIL is set" in message  # its log's tail
    assert "server-1" not in message
    assert [p.name for p in launched] == ["server-1", "server-2"]
    assert all(gone(proc) for proc in launched)
    assert cluster.procs.procs == [] and all(i.proc is None for i in cluster.instances)


def test_waiting_for_several_names_those_not_ready() -> None:
    with pytest.raises(RuntimeError, match=r"^not server-2 serving after 1 s \(None\)$"):
        wait_all([Awaited("server-1 serving", lambda: True),
                  Awaited("server-2 serving", lambda: False)], timeout=1)
