"""``svc-server dev`` runs the reference app as the ``demo`` runtime: its webhook is
registered on loopback, a payment ends with a signed ``payment.delivered`` that grants once
and a ``payment.settled`` the app records, and no secret reaches the output. Started twice
in one directory: the secrets are rotated, the store and the one endpoint are kept."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import httpx
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from payments.developer.models import ApiKey
from payments.ledger.models import AttemptStatus, WebhookAttempt, WebhookEvent
from payments.models import App
from payments.webhooks.models import WebhookEndpoint
from router.dev_backend import DEV_KEY_LABEL
from tests.support.dev_server import DevServer, dev_server
from tests.support.quickstart import quickstart
from tests.support.waits import wait_for

ORIGIN_RE = re.compile(r"demo origin\s+(http://127\.0\.0\.1:\d+)")
SECRET_RE = re.compile(r"zpk_|zwhsec_")


@contextmanager
def service_db(directory: Path) -> Iterator[Session]:
    """A session on the dev server's own database (var/svc.db), closed after use."""
    engine = create_engine(f"sqlite:///{directory / 'var' / 'svc.db'}")
    try:
        with Session(engine) as session:
            yield session
    finally:
        engine.dispose()


def demo_state(directory: Path) -> tuple[App, list[WebhookEndpoint], list[ApiKey]]:
    with service_db(directory) as session:
        app = session.scalars(select(App).where(App.slug == "demo")).one()
        endpoints = list(session.scalars(select(WebhookEndpoint)
                                         .where(WebhookEndpoint.app_id == app.id)))
        keys = list(session.scalars(select(ApiKey).where(ApiKey.app_id == app.id)))
        session.expunge_all()
    return app, endpoints, keys


def log_in(server: DevServer, name: str) -> dict[str, str]:
    answer = httpx.post(server.url + "/api/session", json={"name": name},
                        headers=server.host("demo.apps"))
    assert answer.status_code == 200, answer.text
    return {"token": answer.json()["token"],
            "user": answer.json()["player"]["developerUserId"]}


def inventory(server: DevServer, token: str) -> list[tuple[str, int]]:
    """(product slug, count) of each inventory line the app shows the player."""
    answer = httpx.get(server.url + "/api/inventory", headers={
        **server.host("demo.apps"), "authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    return [(line["productSlug"], line["count"]) for line in answer.json()["items"]]


def settled_at_app(directory: Path, delivery_id: str) -> bool:
    store = directory / "var" / "reference-app.db"
    with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        return db.execute("SELECT 1 FROM refapp_settlements WHERE delivery_id = ?",
                          (delivery_id,)).fetchone() is not None


def sent_webhooks(directory: Path, app_id: str) -> list[tuple[str, AttemptStatus, bool]]:
    """(event type, attempt status, signed) of each webhook attempt for the app, sorted."""
    with service_db(directory) as session:
        rows = session.execute(select(WebhookEvent.type, WebhookAttempt.status,
                                      WebhookAttempt.signed)
                               .join(WebhookAttempt, WebhookAttempt.event_id == WebhookEvent.id)
                               .where(WebhookEvent.app_id == app_id)).all()
    return sorted((kind, status, signed) for kind, status, signed in rows)


def test_dev_runs_the_reference_app_with_its_webhook_on_loopback(tmp_path: Path) -> None:
    with dev_server(tmp_path) as server:
        origin = server.wait_for(ORIGIN_RE).group(1)
        runtime = server.host("demo.apps")
        page = httpx.get(server.url + "/", headers=runtime)
        assert page.status_code == 200
        assert "The reference developer app" in page.text  # not the old placeholder
        manifest = httpx.get(server.url + "/.well-known/svc.json", headers=runtime).json()
        app, endpoints, keys = demo_state(tmp_path)
        assert (manifest["appId"], manifest["runtimeOrigin"]) == (app.id, origin)
        assert [(e.url, e.events) for e in endpoints] == [
            (f"{origin}/api/svc/webhook", ["payment.delivered", "payment.settled"])]
        [key] = keys
        assert key.label == DEV_KEY_LABEL and key.revoked_at is None
        assert len(key.scopes) == 7
        # Unsigned calls are refused by the real receiver (what verification probes).
        assert httpx.post(server.url + "/api/svc/webhook", headers=runtime,
                          content=b"{}").status_code == 401

        player = log_in(server, "Player One")
        with httpx.Client(base_url=server.url, timeout=30) as http:
            delivery_id, _wallet = quickstart.pay_from_runtime(http, server.port, "demo",
                                                               "retry", player["user"])
        wait_for(lambda: bool(inventory(server, player["token"])), 20, "the grant")
        assert inventory(server, player["token"]) == [("retry", 1)]
        wait_for(lambda: settled_at_app(tmp_path, delivery_id), 40, "payment.settled at the app",
                 poll=0.25)
        first_preview = endpoints[0].secret_preview

        # The app records the settlement before the worker commits the attempt it answered.
        wait_for(lambda: sent_webhooks(tmp_path, app.id) == [
            ("payment.delivered", AttemptStatus.DELIVERED, True),
            ("payment.settled", AttemptStatus.DELIVERED, True)], 10,
            "both attempts recorded as delivered", poll=0.25)
        # The grant happened once, from the webhook; the item is not granted twice.
        assert inventory(server, player["token"]) == [("retry", 1)]
    assert not SECRET_RE.search(server.output()), "a secret reached the dev output"

    # A second start in the same directory: one endpoint with a new secret, the old key
    # revoked and a new one, the app's store (and its grant) kept.
    with dev_server(tmp_path) as again:
        _app, endpoints, keys = demo_state(tmp_path)
        assert len(endpoints) == 1 and endpoints[0].secret_preview != first_preview
        assert sorted(k.revoked_at is None for k in keys) == [False, True]
        player = log_in(again, "Player One")  # sessions were signed with the old secret
        assert inventory(again, player["token"]) == [("retry", 1)]
    assert not SECRET_RE.search(again.output())
