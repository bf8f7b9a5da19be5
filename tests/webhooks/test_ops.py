"""``svc-ops webhooks run`` as its own process beside the database, and ``status``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from payments.ledger.models import AttemptStatus
from tests.webhooks.kit import (
    app_with_endpoint,
    attempts,
    enqueue_events,
    receiver,
    wait_until,
)

SERVER_SECRET = "ops-test-server-secret-0123456789abcdef"
SECRET = "zwhsec_" + "d" * 64
OPS = str(Path(sys.executable).with_name("svc-ops"))
# The script of an editable install may import another checkout: this one's, then.
REPO = Path(__file__).resolve().parents[2]


def test_ops_dispatcher_delivers_and_stops_cleanly(db_url: str,
                                                   sessions: sessionmaker[Session]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SVCSRV_")}
    env.update({"SVCSRV_DATABASE_URL": db_url, "SVCSRV_SECRET_KEY": SERVER_SECRET,
                "SVCSRV_WEBHOOK_POLL_INTERVAL": "0.05", "PYTHONPATH": str(REPO)})
    with receiver() as hook:
        hook.secret = SECRET
        app = app_with_endpoint(sessions, "ops", hook.url, SECRET, SERVER_SECRET)
        ids = set(enqueue_events(sessions, app, 20))
        status = subprocess.run([OPS, "webhooks", "status"], env=env, capture_output=True,
                                text=True, timeout=60, check=True)
        assert "pending\t20" in status.stdout and "due\t20" in status.stdout
        proc = subprocess.Popen([OPS, "webhooks", "run"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        try:
            wait_until(lambda: all(a.status == AttemptStatus.DELIVERED
                                   for a in attempts(sessions).values()), timeout=60,
                       what="the ops dispatcher delivers")
        finally:
            proc.send_signal(signal.SIGTERM)
            output, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, output
        assert "dispatcher running" in output
        assert hook.delivered_ids() == ids
        assert SECRET not in output
        status = subprocess.run([OPS, "webhooks", "status"], env=env, capture_output=True,
                                text=True, timeout=60, check=True)
        assert "delivered\t20" in status.stdout


def test_servers_notify_ops_dispatchers_on_postgresql(pg_admin_url: str, pg_template: str,
                                                      tmp_path: Path) -> None:
    """A server without its own dispatcher NOTIFYs on commit; ``svc-ops webhooks run``
    LISTENs, so payments go out at once even with a 60 s poll interval."""
    from tests.conftest import fresh_pg_database
    from tests.factories import sessions_for
    from tests.ledger.flow import build_world
    from tests.support.router import router_factory
    from tests.webhooks.kit import console, create_endpoint, developer_of, pay

    url = fresh_pg_database(pg_admin_url, pg_template)
    sessions = sessions_for(url)
    with router_factory(url)(webhook_workers=False, secret_key=SERVER_SECRET) as router, \
            receiver() as hook:
        world = build_world(router, sessions)
        with console(world, developer_of(world)) as client:
            _, hook.secret = create_endpoint(client, "game", hook.url)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SVCSRV_")}
        env.update({"SVCSRV_DATABASE_URL": url, "SVCSRV_SECRET_KEY": SERVER_SECRET,
                    "SVCSRV_WEBHOOK_POLL_INTERVAL": "60", "PYTHONPATH": str(REPO)})
        proc = subprocess.Popen([OPS, "webhooks", "run"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        try:
            assert proc.stdout is not None and "running" in proc.stdout.readline()
            import time
            time.sleep(1)  # the LISTEN is up (its first wake finds nothing)
            for seed in range(3):
                started = time.monotonic()
                (delivery,) = pay(world, 1, seed=10 + seed)
                wait_until(lambda: any(r.headers.get("x-svc-delivery-id") == delivery  # noqa: B023
                                       for r in hook.requests), timeout=5,
                           what="a NOTIFY-woken delivery")
                assert time.monotonic() - started < 5  # far inside the 60 s poll
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
        assert proc.returncode == 0
    sessions.kw["bind"].dispose()
