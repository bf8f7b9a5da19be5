"""``svc-ops webhooks run`` as its own process beside the database, and ``status``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction, utcnow
from payments.ids import IdPrefix, new_id
from payments.ledger.models import AttemptStatus
from payments.models import App
from payments.webhooks.models import WebhookEndpoint
from payments.webhooks.signing_secrets import SecretBox
from tests.webhooks.kit import attempts, enqueue_events, receiver, wait_until

SERVER_SECRET = "ops-test-server-secret-0123456789abcdef"
SECRET = "zwhsec_" + "d" * 64
OPS = str(Path(sys.executable).with_name("svc-ops"))


def test_ops_dispatcher_delivers_and_stops_cleanly(db_url: str,
                                                   sessions: sessionmaker[Session]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SVCSRV_")}
    env.update({"SVCSRV_DATABASE_URL": db_url, "SVCSRV_SECRET_KEY": SERVER_SECRET,
                "SVCSRV_WEBHOOK_POLL_INTERVAL": "0.05"})
    with receiver() as hook:
        hook.secret = SECRET
        box = SecretBox(SERVER_SECRET)
        with transaction(sessions) as session:
            app = App(name="Ops", slug="ops")
            session.add(app)
            session.flush()
            endpoint_id = new_id(IdPrefix.WEBHOOK)
            session.add(WebhookEndpoint(
                id=endpoint_id, app_id=app.id, url=hook.url, events=["payment.delivered"],
                secret_sealed=box.seal(SECRET, endpoint_id), secret_preview="zwhsec_…dddd",
                secret_created_at=utcnow()))
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
