"""Events skipped while the endpoint was disabled: counted when it is enabled again, and
resent with one call, oldest first and one at a time, each once, and never twice.

The payments are real (product route, in-process chain, the settlement worker), so the
skipped events are the ledger's own: an optimistic purchase's ``payment.delivered`` and
later ``payment.settled``, and a ``settled_first`` purchase's two events, written in one
transaction at one time when it settles."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.ledger.models import AttemptStatus, WebhookEvent
from tests.ledger.flow import PayWorld, build_world
from tests.support.router import RouterFactory
from tests.webhooks.kit import (
    FAST,
    FaultyReceiver,
    all_settled,
    api_client,
    attempts,
    create_endpoint,
    developer_of,
    grant_token,
    pay,
    wait_until,
)

APPS = "/api/developer/apps/game"
BOTH = ["payment.delivered", "payment.settled"]


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[PayWorld]:
    with start_router(**FAST, chain_workers=True, chain_worker_interval=0.1,
                      settlement_batch_age_seconds=0.0) as router:
        yield build_world(router, sessions)


@pytest.fixture
def writer(world: PayWorld) -> Iterator[httpx.Client]:
    token = grant_token(world.sessions, developer_of(world), "game",
                        ["apps:read", "webhooks:write"])
    with api_client(world, token) as client:
        yield client


def skipped_while_disabled(sessions: sessionmaker[Session]) -> list[str]:
    return [a.event_id for a in attempts(sessions).values()
            if a.status == AttemptStatus.SKIPPED and a.last_error == "endpoint_disabled"]


def purchase_while_disabled(world: PayWorld, writer: httpx.Client,
                            hid: str) -> tuple[list[str], str]:
    """One optimistic and one settled_first purchase, both settled, while the endpoint is
    disabled, and a test event; the delivery ids and the test event's id."""
    off = writer.patch(f"{APPS}/webhooks/{hid}", json={"enabled": False})
    assert off.status_code == 200 and off.json()["webhook"]["skippedWhileDisabled"] == 0
    deliveries = pay(world, 1) + pay(world, 1, product="legendary", seed=2)
    tested = writer.post(f"{APPS}/webhooks/{hid}/test")
    assert tested.status_code == 202
    wait_until(lambda: len(skipped_while_disabled(world.sessions)) == 5
               and all_settled(world.sessions)(), timeout=60,
               what="two purchases settled and their four events (and the test) skipped")
    return deliveries, tested.json()["attempt"]["eventId"]


def sent_order(hook: FaultyReceiver) -> list[tuple[str, str, str]]:
    """(event id, type, delivery id) of each request, in the order they arrived."""
    return [(r.event_id, r.headers["x-svc-event"], json.loads(r.body)["delivery"]["deliveryId"])
            for r in sorted(hook.requests, key=lambda r: r.started)]


def test_enabling_counts_the_skipped_and_one_call_resends_them_in_order_once(
        world: PayWorld, hook: FaultyReceiver, writer: httpx.Client) -> None:
    webhook, hook.secret = create_endpoint(writer, "game", hook.url, BOTH)
    hid = webhook["id"]
    deliveries, test_event = purchase_while_disabled(world, writer, hid)
    assert hook.requests == []
    # Disabled: the count is there already, and a resend is refused, not silently skipped.
    assert writer.get(f"{APPS}/webhooks/{hid}").json()["webhook"]["skippedWhileDisabled"] == 4
    refused = writer.post(f"{APPS}/webhooks/{hid}/resend-skipped")
    assert (refused.status_code, refused.json()["code"]) == (409, "webhook_disabled")

    enabled = writer.patch(f"{APPS}/webhooks/{hid}", json={"enabled": True})
    assert enabled.status_code == 200
    assert enabled.json()["webhook"]["skippedWhileDisabled"] == 4  # the test event is not
    time.sleep(0.5)
    assert hook.requests == []  # enabling alone sends nothing

    hook.delay = 0.2  # requests sent side by side would overlap
    resent = writer.post(f"{APPS}/webhooks/{hid}/resend-skipped")
    assert resent.status_code == 202, resent.text
    body = resent.json()
    assert body["resent"] == 4 and len(body["attempts"]) == 4
    views = body["attempts"]
    assert [v["createdAt"] for v in views] == sorted(v["createdAt"] for v in views)
    assert views[0]["queuedBehind"] is None and views[0]["nextAttemptAt"] is not None
    assert all(v["status"] == "pending" and v["nextAttemptAt"] is None for v in views[1:])
    assert [v["queuedBehind"] for v in views[1:]] == [v["id"] for v in views[:-1]]
    wait_until(lambda: len(hook.delivered_ids()) == 4 and all_settled(world.sessions)(),
               timeout=30, what="the four events delivered")

    arrived = sent_order(hook)
    assert [e for e, _, _ in arrived] == [v["eventId"] for v in views]  # in creation order
    assert Counter(e for e, _, _ in arrived) == Counter(v["eventId"] for v in views)
    for delivery in deliveries:
        types = [t for _, t, d in arrived if d == delivery]
        assert types == BOTH, (delivery, types)  # payment.delivered first, each once
    ordered = sorted(hook.requests, key=lambda r: r.started)
    for before, after in pairwise(ordered):
        assert after.started >= before.at, "a request started before the previous answer"
    assert sorted(d for _, d in hook.ledger.grants()) == sorted(deliveries)
    with world.sessions() as session:  # the ledger's events, under their own ids
        recorded = {e.id: e.type for e in session.scalars(select(WebhookEvent))}
    assert all(recorded[e] == t for e, t, _ in arrived)

    # Nothing is left: a second resend sends nothing and says so.
    after = writer.get(f"{APPS}/webhooks/{hid}").json()["webhook"]
    assert after["skippedWhileDisabled"] == 0
    again = writer.post(f"{APPS}/webhooks/{hid}/resend-skipped")
    assert again.status_code == 202 and again.json() == {"resent": 0, "attempts": []}
    time.sleep(0.5)
    assert len(hook.requests) == 4
    # The test event stayed skipped: it is retried by hand if at all.
    assert skipped_while_disabled(world.sessions) == [test_event]


def test_concurrent_resends_send_each_event_once(world: PayWorld, hook: FaultyReceiver,
                                                 writer: httpx.Client) -> None:
    webhook, hook.secret = create_endpoint(writer, "game", hook.url, BOTH)
    hid = webhook["id"]
    purchase_while_disabled(world, writer, hid)
    writer.patch(f"{APPS}/webhooks/{hid}", json={"enabled": True})
    token = grant_token(world.sessions, developer_of(world), "game", ["webhooks:write"])

    def resend(_: int) -> int:
        with api_client(world, token) as client:
            answer = client.post(f"{APPS}/webhooks/{hid}/resend-skipped")
            assert answer.status_code == 202, answer.text
            count: int = answer.json()["resent"]
            return count
    with ThreadPoolExecutor(4) as pool:
        counts = list(pool.map(resend, range(4)))
    assert sum(counts) == 4 and sorted(counts)[-1] == 4  # one call took all four
    wait_until(lambda: len(hook.delivered_ids()) == 4 and all_settled(world.sessions)(),
               timeout=30, what="the four events delivered")
    time.sleep(0.3)
    assert sorted(Counter(r.event_id for r in hook.requests).values()) == [1, 1, 1, 1]


def test_a_legacy_subscription_gets_the_twins_of_what_was_skipped(
        world: PayWorld, hook: FaultyReceiver, writer: httpx.Client) -> None:
    webhook, hook.secret = create_endpoint(writer, "game", hook.url, ["delivery.created"])
    hid = webhook["id"]
    writer.patch(f"{APPS}/webhooks/{hid}", json={"enabled": False})
    (delivery,) = pay(world, 1)
    wait_until(lambda: len(skipped_while_disabled(world.sessions)) == 2
               and all_settled(world.sessions)(), timeout=60,
               what="payment.delivered and payment.settled skipped")
    enabled = writer.patch(f"{APPS}/webhooks/{hid}", json={"enabled": True}).json()
    assert enabled["webhook"]["skippedWhileDisabled"] == 1  # payment.settled is not wanted
    resent = writer.post(f"{APPS}/webhooks/{hid}/resend-skipped").json()
    assert [v["type"] for v in resent["attempts"]] == ["payment.delivered"]
    wait_until(lambda: len(hook.delivered_ids()) == 1 and all_settled(world.sessions)(),
               what="the legacy twin")
    assert [r.headers["x-svc-event"] for r in hook.requests] == ["delivery.created"]
    assert [d for _, d in hook.ledger.grants()] == [delivery]
    with world.keyed() as backend:
        assert backend.get(f"/api/deliveries/{delivery}").json()["delivery"]["fulfilled"]
