"""``svc-ops chain run``'s loop (ops/chain_worker.py): a stop between cycles, the heartbeat,
and the servers' ``/statusz`` reading its age. The loop over a real chain, as a process of
its own, is in test_json_rpc.py."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from ops.chain_worker import run_worker
from payments.chain.heartbeat import beat, heartbeats, row_name, stale_after
from payments.db import utcnow
from tests.router.conftest import RouterFactory

RELAYER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
OTHER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"


class SignalledCycle:
    """A cycle that takes a SIGTERM in its middle, as `docker compose restart chain` may."""

    def __init__(self) -> None:
        self.started = self.finished = 0

    def run(self) -> None:
        self.started += 1
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # the handler has run by now; the cycle goes on to its end
        self.finished += 1


def test_sigterm_finishes_the_cycle_then_stops_with_a_heartbeat(
        sessions: sessionmaker[Session], capsys: pytest.CaptureFixture[str]) -> None:
    before = signal.getsignal(signal.SIGTERM)
    cycle = SignalledCycle()
    assert run_worker(cycle, sessions, RELAYER, interval=30.0) == 0
    assert (cycle.started, cycle.finished) == (1, 1)  # no second cycle, no 30 s wait
    assert signal.getsignal(signal.SIGTERM) is before
    out = capsys.readouterr().out
    assert f"chain worker running for relayer {RELAYER}" in out
    assert "SIGTERM: finishing this cycle" in out and "stopped after 1 cycle(s)" in out
    with sessions() as session:
        [found] = heartbeats(session)
    assert (found.relayer, found.cycles) == (RELAYER, 1)


def test_one_heartbeat_row_per_relayer(sessions: sessionmaker[Session]) -> None:
    now = utcnow()
    for cycles in (1, 2, 3):
        beat(sessions, RELAYER, cycles, now + timedelta(seconds=cycles))
    beat(sessions, OTHER, 1, now)
    with sessions() as session:
        rows = heartbeats(session)
    assert [(b.relayer, b.cycles) for b in rows] == [(RELAYER, 3), (OTHER, 1)]
    assert len(row_name(RELAYER)) <= 40  # chain_cursors.name


def _status(router_url: str, port: int) -> httpx.Response:
    return httpx.get(router_url + "/statusz", headers={"host": f"api.localhost:{port}"},
                     timeout=10)


def test_statusz_reports_the_chain_workers_heartbeat(
        start_router: RouterFactory, sessions: sessionmaker[Session]) -> None:
    # The test servers run no chain workers (chain_workers=False), as scale-out servers do.
    with start_router(chain_worker_interval=1.0) as router:
        never = _status(router.url, router.port)
        assert never.status_code == 200  # no worker ever ran here: nothing to miss
        assert never.json()["checks"]["chainWorker"]["status"] == "not_seen"

        beat(sessions, RELAYER, 7, utcnow())
        alive = _status(router.url, router.port)
        assert alive.status_code == 200
        worker = alive.json()["checks"]["chainWorker"]
        assert worker["status"] == "ok"
        assert worker["workers"] == [{**worker["workers"][0], "relayer": RELAYER,
                                      "cycles": 7, "stale": False}]

        limit = stale_after(1.0)
        beat(sessions, RELAYER, 8, utcnow() - limit - timedelta(seconds=5))
        gone = _status(router.url, router.port)
        assert gone.status_code == 503
        assert gone.json()["status"] == "degraded"
        worker = gone.json()["checks"]["chainWorker"]
        assert worker["status"] == "stale"
        assert "nothing is relayed or settled" in worker["detail"]

        # A second worker (its own key) alive is enough; the silent one is marked.
        beat(sessions, OTHER, 1, utcnow())
        both = _status(router.url, router.port)
        assert both.status_code == 200
        stale = {w["relayer"]: w["stale"] for w in both.json()["checks"]["chainWorker"]["workers"]}
        assert stale == {OTHER: False, RELAYER: True}


def test_servers_that_run_the_chain_workers_do_not_read_heartbeats(
        start_router: RouterFactory) -> None:
    with start_router(chain_workers=True) as router:
        assert "chainWorker" not in _status(router.url, router.port).json()["checks"]
