"""kill -9 of a real ``svc-server serve`` on PostgreSQL while 1,000 events are in flight,
then a restart: every event reaches the receiver at least once, none is lost.

The events are written straight into the outbox (the rows the ledger writes in the payment
transaction); the subject here is the dispatcher's durability, not the payment path."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from payments.db import make_engine, make_sessionmaker
from payments.ledger.models import AttemptStatus
from tests.conftest import fresh_pg_database
from tests.support.services import free_port
from tests.webhooks.kit import (
    app_with_endpoint,
    attempts,
    enqueue_events,
    receiver,
    wait_until,
)

EVENTS = 1000
SERVER_SECRET = "crash-test-server-secret-0123456789abcdef"
SECRET = "zwhsec_" + "c" * 64
LEASE = 12.0
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def pg_url(pg_admin_url: str, pg_template: str) -> str:
    return fresh_pg_database(pg_admin_url, pg_template)


@pytest.fixture
def sessions(pg_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(pg_url)
    yield make_sessionmaker(engine)
    engine.dispose()


def serve(pg_url: str, port: int, tmp: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SVCSRV_")}
    env.update({
        "SVCSRV_MODE": "dev", "SVCSRV_DATABASE_URL": pg_url, "SVCSRV_BIND_PORT": str(port),
        "SVCSRV_SECRET_KEY": SERVER_SECRET, "SVCSRV_CHAIN_WORKERS": "false",
        "SVCSRV_WEBHOOK_WORKERS": "true", "SVCSRV_WEBHOOK_TIMEOUT": "2",
        "SVCSRV_WEBHOOK_LEASE_SECONDS": str(LEASE), "SVCSRV_WEBHOOK_POLL_INTERVAL": "0.1",
        "SVCSRV_WEBHOOK_RETRY_DELAYS": "0.1,0.1,0.1,0.1,0.1,0.1,0.1",
        # The script of an editable install may import another checkout.
        "PYTHONPATH": str(REPO),
    })
    proc = subprocess.Popen([str(Path(sys.executable).with_name("svc-server")), "serve"],
                            cwd=tmp, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz",
                      headers={"host": f"api.localhost:{port}"}, timeout=1)
            return proc
        except httpx.TransportError:
            assert proc.poll() is None, "svc-server serve exited"
            assert time.monotonic() < deadline, "svc-server serve did not start"
            time.sleep(0.1)


def test_kill_9_mid_delivery_loses_nothing(pg_url: str, sessions: sessionmaker[Session],
                                           tmp_path: Path) -> None:
    with receiver() as hook:
        hook.delay = 0.2  # ~250 requests in flight at any moment
        hook.secret = SECRET
        app = app_with_endpoint(sessions, "crash", hook.url, SECRET, SERVER_SECRET)
        ids = set(enqueue_events(sessions, app, EVENTS))
        port = free_port()
        first = serve(pg_url, port, tmp_path)
        try:
            wait_until(lambda: len(hook.requests) >= 200, timeout=60, what="deliveries begin")
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        seen_at_kill = len(hook.delivered_ids())
        in_flight = sum(1 for a in attempts(sessions).values() if a.claim_token is not None)
        assert seen_at_kill < EVENTS and in_flight > 0  # it died with claims outstanding
        second = serve(pg_url, port, tmp_path)
        try:
            wait_until(lambda: hook.delivered_ids() >= ids, timeout=LEASE + 60,
                       what="every event delivered after the restart")
            wait_until(lambda: all(a.status == AttemptStatus.DELIVERED
                                   for a in attempts(sessions).values()),
                       timeout=30, what="every outcome recorded")
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(30)
    sent = Counter(r.event_id for r in hook.requests if r.status == 200)
    assert set(sent) == ids  # none lost; those in flight at the kill may come twice
    assert len(hook.ledger.grants()) == EVENTS  # the receiver granted each once anyway
