"""``POST /api/svc/webhook`` of the reference app, sent by the service's real dispatcher:
verified over the raw body, granted once per delivery whatever arrives twice or at once,
test events grant nothing, ``payment.settled`` is recorded, a store that is down answers
5xx and the service's retry then grants."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from payments.ledger.models import AttemptStatus
from tests.conftest import fresh_pg_database
from tests.reference_app.world import (
    PLAYER_ID,
    RefWorld,
    payer,
    reference_world,
    signed_headers,
    sqlite_store,
    wait_for_value,
)
from tests.support.router import RouterFactory
from tests.webhooks.kit import FAST, attempts, events

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def event_body(world: RefWorld, delivery_id: str, kind: str = "payment.delivered") -> bytes:
    """The event exactly as the service wrote it (the same bytes on every retry)."""
    found = [e for e in events(world.sessions) if e.type == kind
             and e.payload["delivery"]["deliveryId"] == delivery_id]
    assert len(found) == 1
    return json.dumps(found[0].payload, separators=(",", ":")).encode()


def post(world: RefWorld, body: bytes, headers: dict[str, str]) -> httpx.Response:
    with world.app_client() as client:
        return client.post("/api/svc/webhook", content=body, headers=headers)


def test_genuine_event_grants_once_and_a_bad_signature_is_refused(ref: RefWorld) -> None:
    paid = payer(ref, 1).pay("retry", "hook-1")
    grant = wait_for_value(lambda: ref.grants(), "the webhook grant")
    assert len(grant) == 1 and grant[0].delivery_id == paid["deliveryId"]
    assert (grant[0].source, grant[0].product_slug, grant[0].amount_atomic) == (
        "webhook", "retry", 10_000)
    assert grant[0].idempotency_key == "svc:hook-1"
    body = event_body(ref, paid["deliveryId"])

    # not genuine: 401 in the envelope, nothing granted
    bad = signed_headers(body, "zwhsec_" + "0" * 64)
    for headers in (bad, {"content-type": "application/json"},
                    {**signed_headers(body, ref.hook_secret), "x-svc-timestamp":
                     "2020-01-01T00:00:00Z"}):
        refused = post(ref, body, headers)
        assert refused.status_code == 401, refused.text
        assert refused.json()["code"] == "signature_invalid"
    tampered = body.replace(b'"retry"', b'"unlock-level"')
    assert post(ref, tampered, signed_headers(body, ref.hook_secret)).status_code == 401

    # the same delivery again, by hand: 2xx, still one grant
    again = post(ref, body, signed_headers(body, ref.hook_secret))
    assert again.status_code == 200 and again.json()["granted"] is False
    assert len(ref.grants()) == 1


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_one_delivery_sent_concurrently_grants_once(
        start_router: RouterFactory, sessions: sessionmaker[Session], tmp_path: Path,
        request: pytest.FixtureRequest, store: str) -> None:
    store_url = sqlite_store(tmp_path) if store == "sqlite" else fresh_pg_database(
        request.getfixturevalue("pg_admin_url"), None)
    with reference_world(start_router, sessions, store_url) as world:
        paid = payer(world, 2).pay("unlock-level", "race-1")
        wait_for_value(lambda: world.grants(), "the first grant")
        body = event_body(world, paid["deliveryId"])
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(
                lambda _: post(world, body, signed_headers(body, world.hook_secret)),
                range(32)))
        assert {a.status_code for a in answers} == {200}
        assert sum(a.json()["granted"] for a in answers) == 0  # the dispatcher's was first
        assert [g.delivery_id for g in world.grants()] == [paid["deliveryId"]]

        # the app never saw it (its store restored from an older backup, say): 32 times
        # at once, exactly one grant
        restored = world.store()
        with restored.engine.begin() as conn:
            conn.execute(text("DELETE FROM refapp_grants"))
        restored.engine.dispose()
        assert world.grants() == []
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(
                lambda _: post(world, body, signed_headers(body, world.hook_secret)),
                range(32)))
        assert {a.status_code for a in answers} == {200}
        assert sum(a.json()["granted"] for a in answers) == 1, [a.json() for a in answers][:3]
        assert [g.delivery_id for g in world.grants()] == [paid["deliveryId"]]


def test_test_events_grant_nothing(ref: RefWorld) -> None:
    with ref.developer() as developer:
        queued = developer.post(f"/api/developer/apps/game/webhooks/{ref.webhook_id}/test")
    assert queued.status_code == 202, queued.text
    wait_for_value(lambda: [a for a in attempts(ref.sessions).values()
                            if a.status == AttemptStatus.DELIVERED], "the test event")
    store = ref.store()
    try:
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM refapp_grants")).scalar() == 0
    finally:
        store.engine.dispose()


def test_store_down_answers_5xx_and_the_service_retry_grants(
        start_router: RouterFactory, sessions: sessionmaker[Session], tmp_path: Path) -> None:
    slow = {**FAST, "webhook_retry_delays": (1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)}
    with reference_world(start_router, sessions, sqlite_store(tmp_path), **slow) as world:
        store = world.store()
        with store.engine.begin() as conn:  # the store "goes down": its table is gone
            conn.execute(text("ALTER TABLE refapp_grants RENAME TO refapp_grants_away"))
        paid = payer(world, 4).pay("retry", "down-1")
        failed = wait_for_value(lambda: [a for a in attempts(sessions).values()
                                         if a.response_status == 503], "a 503 answer")
        assert failed[0].status == AttemptStatus.PENDING  # the service will retry it
        body = event_body(world, paid["deliveryId"])
        direct = post(world, body, signed_headers(body, world.hook_secret))
        assert direct.status_code == 503 and direct.json()["code"] == "store_unavailable"
        with store.engine.begin() as conn:
            conn.execute(text("ALTER TABLE refapp_grants_away RENAME TO refapp_grants"))
        store.engine.dispose()
        granted = wait_for_value(lambda: world.grants(), "the grant after the retry")
        assert [g.delivery_id for g in granted] == [paid["deliveryId"]]
        attempt = wait_for_value(lambda: [a for a in attempts(sessions).values()
                                          if a.status == AttemptStatus.DELIVERED],
                                 "the delivered attempt")[0]
        assert attempt.attempt_count >= 2 and attempt.response_status == 200
        assert granted[0].event_id == attempt.event_id  # the same event, retried


def test_payment_settled_is_recorded_after_the_settlement_worker(
        start_router: RouterFactory, sessions: sessionmaker[Session], tmp_path: Path) -> None:
    with reference_world(start_router, sessions, sqlite_store(tmp_path), chain_workers=True,
                         chain_worker_interval=0.1, settlement_batch_age_seconds=0.0) as world:
        paid = payer(world, 5).pay("retry", "settle-1")
        wait_for_value(lambda: world.grants(PLAYER_ID), "the grant")

        def settled() -> dict[str, object] | None:
            store = world.store()
            try:
                return store.settlement(paid["deliveryId"])
            finally:
                store.engine.dispose()
        recorded = wait_for_value(settled, "payment.settled", timeout=60)
        assert str(recorded["tx_hash"]).startswith("0x")
