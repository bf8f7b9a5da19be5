"""The webhook developer API: endpoint lifecycle, secrets shown once, scopes, test events,
attempt records, manual retries, subscriptions, the legacy event, limits and bad input."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import func, select

from payments.chain.params import in_process_params
from payments.db import transaction, utcnow
from payments.ledger.charges import enqueue_event
from payments.ledger.models import Charge, Delivery, WebhookEvent
from payments.models import App, Product
from payments.schemas import WEBHOOK_EVENT, load_schema, validator
from svc.webhooks import WebhookVerificationError, verify_webhook
from tests.ledger.flow import PayWorld
from tests.webhooks.kit import (
    FAIL,
    OK,
    FaultyReceiver,
    all_settled,
    api_client,
    attempts,
    create_endpoint,
    developer_of,
    enqueue_events,
    grant_token,
    pay,
    wait_until,
)

APPS = "/api/developer/apps/game"
CHECK = validator(load_schema(WEBHOOK_EVENT))


@pytest.fixture
def writer(world: PayWorld) -> Iterator[httpx.Client]:
    token = grant_token(world.sessions, developer_of(world), "game",
                        ["apps:read", "webhooks:write"])
    with api_client(world, token) as client:
        yield client


def verify(hook: FaultyReceiver, index: int, secret: str) -> dict[str, object]:
    r = hook.requests[index]
    verify_webhook(r.body, r.headers["x-svc-timestamp"], r.headers["x-svc-signature"], secret)
    body: dict[str, object] = json.loads(r.body)
    assert list(CHECK.iter_errors(body)) == []
    return body


def test_endpoint_lifecycle_and_secret_shown_once(world: PayWorld, hook: FaultyReceiver,
                                                  writer: httpx.Client,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    created = writer.post(f"{APPS}/webhooks", json={"url": hook.url})
    assert created.status_code == 201, created.text
    assert created.headers["cache-control"] == "no-store"
    webhook, secret = created.json()["webhook"], created.json()["secret"]
    assert webhook["id"].startswith("zwh_") and secret.startswith("zwhsec_")
    assert webhook["events"] == ["payment.delivered"] and webhook["status"] == "enabled"
    assert webhook["secretPreview"] == f"zwhsec_…{secret[-4:]}"
    hid = webhook["id"]
    again = writer.post(f"{APPS}/webhooks", json={"url": hook.url})
    assert again.status_code == 409 and again.json()["code"] == "webhook_exists"
    listed = writer.get(f"{APPS}/webhooks")
    one = writer.get(f"{APPS}/webhooks/{hid}")
    changed = writer.patch(f"{APPS}/webhooks/{hid}",
                           json={"events": ["payment.delivered", "payment.settled"]})
    assert changed.status_code == 200 and changed.json()["webhook"]["events"] == [
        "payment.delivered", "payment.settled"]
    for answer in (listed, one, changed):
        assert secret not in answer.text and "secret\"" not in answer.text
    assert listed.json()["webhooks"][0]["id"] == hid
    # The database holds the secret sealed, never in the clear.
    with world.sessions() as session:
        from payments.webhooks.models import WebhookEndpoint
        row = session.get(WebhookEndpoint, hid)
        assert row is not None and secret not in row.secret_sealed
    hook.secret = secret
    pay(world, 1)
    wait_until(lambda: len(hook.ledger.grants()) == 1, what="a grant")
    verify(hook, 0, secret)
    # Rotation: a new secret, shown once; requests from now on carry its signature.
    rotated = writer.post(f"{APPS}/webhooks/{hid}/rotate")
    assert rotated.status_code == 200 and rotated.headers["cache-control"] == "no-store"
    new_secret = rotated.json()["secret"]
    assert new_secret != secret and new_secret.startswith("zwhsec_")
    hook.secret = new_secret
    pay(world, 1, seed=2)
    wait_until(lambda: len(hook.ledger.grants()) == 2, what="a second grant")
    verify(hook, 1, new_secret)
    r = hook.requests[1]
    with pytest.raises(WebhookVerificationError):
        verify_webhook(r.body, r.headers["x-svc-timestamp"], r.headers["x-svc-signature"],
                       secret)
    # Attempt records and the debugger view: no signature, no secret, ever.
    wait_until(all_settled(world.sessions), what="recorded")
    listing = writer.get(f"{APPS}/webhook-attempts")
    assert listing.status_code == 200
    views = listing.json()["attempts"]
    assert len(views) == 2 and {v["status"] for v in views} == {"delivered"}
    detail = writer.get(f"{APPS}/webhook-attempts/{views[0]['id']}")
    assert detail.status_code == 200
    assert detail.json()["tries"][0]["responseStatus"] == 200
    for text in (listing.text, detail.text):
        assert "sha256=" not in text and "zwhsec_" not in text.replace("zwhsec_…", "")
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert secret not in logged and new_secret not in logged and "sha256=" not in logged


def test_grant_scopes(world: PayWorld, hook: FaultyReceiver) -> None:
    reader = grant_token(world.sessions, developer_of(world), "game", ["apps:read"])
    with api_client(world, reader) as client:
        refused = client.post(f"{APPS}/webhooks", json={"url": hook.url})
        assert refused.status_code == 403
        assert refused.json()["code"] == "developer_cli_scope_missing"
        assert refused.json()["scope"] == "webhooks:write"
        assert client.get(f"{APPS}/webhooks").status_code == 200
        assert client.get(f"{APPS}/webhook-attempts").status_code == 200
    with httpx.Client(base_url=world.router.url, headers={
            "host": f"api.localhost:{world.router.port}"}) as anonymous:
        assert anonymous.get(f"{APPS}/webhooks").json()["code"] == "developer_auth_required"


def test_test_webhook(world: PayWorld, hook: FaultyReceiver, writer: httpx.Client) -> None:
    webhook, hook.secret = create_endpoint(writer, "game", hook.url)
    with world.sessions() as session:
        charges = session.scalar(select(func.count()).select_from(Charge))
        deliveries = session.scalar(select(func.count()).select_from(Delivery))
    queued = writer.post(f"{APPS}/webhooks/{webhook['id']}/test")
    assert queued.status_code == 202, queued.text
    attempt = queued.json()["attempt"]
    assert attempt["test"] is True and attempt["type"] == "payment.delivered"
    wait_until(lambda: len(hook.requests) == 1, what="the test request")
    body = verify(hook, 0, hook.secret)
    assert body["test"] is True and body["id"] == attempt["eventId"]
    delivery = body["delivery"]
    assert isinstance(delivery, dict)
    assert delivery["idempotencyKey"] == f"webhook-test:{body['id']}"
    assert hook.requests[0].headers["x-svc-idempotency-key"] == delivery["idempotencyKey"]
    assert hook.ledger.grants() == []  # a receiver never grants for a test event
    with world.sessions() as session:
        assert session.scalar(select(func.count()).select_from(Charge)) == charges
        assert session.scalar(select(func.count()).select_from(Delivery)) == deliveries
    wait_until(all_settled(world.sessions), what="recorded")
    detail = writer.get(f"{APPS}/webhook-attempts/{attempt['eventId']}").json()
    assert detail["attempt"]["status"] == "delivered" and detail["event"]["test"] is True


def test_manual_retry_reuses_the_event_id(world: PayWorld, hook: FaultyReceiver,
                                          writer: httpx.Client) -> None:
    hook.plan = lambda n, event: FAIL
    _, hook.secret = create_endpoint(writer, "game", hook.url)
    pay(world, 1)
    wait_until(all_settled(world.sessions), what="the schedule used up")
    (attempt,) = attempts(world.sessions).values()
    assert attempt.status.value == "failed" and attempt.attempt_count == 8
    assert attempt.response_status == 503
    assert len(hook.requests) == 8 and len({r.event_id for r in hook.requests}) == 1
    hook.plan = lambda n, event: OK
    retried = writer.post(f"{APPS}/webhook-attempts/{attempt.event_id}/retry")
    assert retried.status_code == 202, retried.text
    assert retried.json()["attempt"]["status"] == "pending"
    wait_until(lambda: attempts(world.sessions)[attempt.event_id].status.value == "delivered",
               what="the manual retry")
    assert hook.requests[-1].event_id == attempt.event_id
    assert attempts(world.sessions)[attempt.event_id].attempt_count == 9
    assert len(hook.ledger.grants()) == 1
    tries = writer.get(f"{APPS}/webhook-attempts/{attempt.id}").json()["tries"]
    assert [t["number"] for t in tries] == list(range(1, 10))
    assert [t["responseStatus"] for t in tries] == [503] * 8 + [200]


def test_subscriptions_skips_and_the_legacy_event(world: PayWorld, hook: FaultyReceiver,
                                                   writer: httpx.Client) -> None:
    (first,) = pay(world, 1)  # no endpoint yet
    wait_until(all_settled(world.sessions), what="skipped")
    (skipped,) = attempts(world.sessions).values()
    assert (skipped.status.value, skipped.last_error) == ("skipped", "no_endpoint")
    webhook, hook.secret = create_endpoint(writer, "game", hook.url,
                                           ["payment.delivered", "delivery.created"])
    # A skipped event can be sent later by hand, under its own id.
    assert writer.post(f"{APPS}/webhook-attempts/{skipped.event_id}/retry").status_code == 202
    deliveries = pay(world, 2, seed=3)
    wait_until(lambda: len(hook.requests) == 6 and all_settled(world.sessions)(),
               what="three payment.delivered (one retried by hand) and their legacy twins")
    kinds = sorted(r.headers["x-svc-event"] for r in hook.requests)
    assert kinds == ["delivery.created"] * 3 + ["payment.delivered"] * 3
    bodies = [verify(hook, i, hook.secret) for i in range(len(hook.requests))]
    by_delivery: dict[str, set[object]] = {}
    for body in bodies:
        assert isinstance(body["delivery"], dict)
        by_delivery.setdefault(body["delivery"]["deliveryId"], set()).add(body["id"])
    assert sorted(by_delivery) == sorted([first, *deliveries])
    assert all(len(ids) == 2 for ids in by_delivery.values())  # own ids, one of each type
    # Twins share the grant key: three payments, three grants.
    assert sorted(d for _, d in hook.ledger.grants()) == sorted([first, *deliveries])
    # Unsubscribed and disabled endpoints skip.
    writer.patch(f"{APPS}/webhooks/{webhook['id']}", json={"events": ["payment.settled"]})
    pay(world, 1, seed=4)
    wait_until(all_settled(world.sessions), what="the unsubscribed event skipped")
    writer.patch(f"{APPS}/webhooks/{webhook['id']}", json={"enabled": False})
    test_event = writer.post(f"{APPS}/webhooks/{webhook['id']}/test")
    wait_until(all_settled(world.sessions), what="skips")
    errors = sorted(a.last_error or "" for a in attempts(world.sessions).values()
                    if a.status.value == "skipped")
    assert errors == ["endpoint_disabled", "not_subscribed"], errors
    assert test_event.status_code == 202


def test_payment_settled_event_is_delivered_and_valid(world: PayWorld, hook: FaultyReceiver,
                                                      writer: httpx.Client) -> None:
    _, hook.secret = create_endpoint(writer, "game", hook.url, ["payment.settled"])
    (delivery_id,) = pay(world, 1)
    with transaction(world.sessions) as session:  # what the settlement worker writes
        delivery = session.get(Delivery, delivery_id)
        assert delivery is not None
        charge = session.get(Charge, delivery.charge_seq)
        app, product = session.get(App, delivery.app_id), session.get(Product,
                                                                       delivery.product_id)
        assert charge and app and product
        enqueue_event(session, "payment.settled", app, product, charge, delivery,
                      in_process_params(), utcnow())
    wait_until(lambda: len(hook.requests) == 1, what="payment.settled")
    body = verify(hook, 0, hook.secret)
    assert body["type"] == "payment.settled"
    with world.sessions() as session:
        types = sorted(e.type for e in session.scalars(select(WebhookEvent)))
    assert types == ["payment.delivered", "payment.settled"]


def test_attempt_pages_list_events_sharing_a_time_once_each(world: PayWorld,
                                                            writer: httpx.Client) -> None:
    """The events one transaction writes share ``created_at`` (a settlement batch's
    ``payment.settled`` events): a page ending inside such a group goes on from the next
    event id of that time, so every event is listed once, in order, whatever the page size;
    a last page that is exactly full says there is nothing more (``nextBefore`` null)."""
    with world.sessions() as session:
        app = session.scalars(select(App).where(App.slug == "game")).one()
    older = enqueue_events(world.sessions, app, 2)
    shared = enqueue_events(world.sessions, app, 5)  # one transaction: one created_at
    newer = enqueue_events(world.sessions, app, 1)
    with world.sessions() as session:
        rows = session.execute(select(WebhookEvent.created_at, WebhookEvent.id)
                               .where(WebhookEvent.app_id == app.id)).all()
    assert len({when for when, event_id in rows if event_id in shared}) == 1
    expected = [event_id for _, event_id in sorted(rows, reverse=True)]
    assert sorted(expected) == sorted(older + shared + newer)

    def walk(limit: int, **query: str) -> list[list[str]]:
        pages: list[list[str]] = []
        before: str | None = None
        while len(pages) < 20:
            params = {"limit": str(limit), **query, **({"before": before} if before else {})}
            answer = writer.get(f"{APPS}/webhook-attempts", params=params)
            assert answer.status_code == 200, answer.text
            pages.append([view["eventId"] for view in answer.json()["attempts"]])
            before = answer.json()["nextBefore"]
            if before is None:
                return pages
        raise AssertionError(f"no last page: {pages}")

    for limit in (1, 2, 3, 5, 7):
        pages = walk(limit)
        assert [event_id for page in pages for event_id in page] == expected, limit
        assert [len(page) for page in pages[:-1]] == [limit] * (len(pages) - 1)
    assert [len(page) for page in walk(4)] == [4, 4]  # exactly full: no empty third page
    assert walk(8) == [expected] and walk(200) == [expected]
    # A bare time, as `before` was before the cursor: the events created before it.
    shared_time = writer.get(f"{APPS}/webhook-attempts/{shared[0]}").json()["attempt"][
        "createdAt"]
    answer = writer.get(f"{APPS}/webhook-attempts", params={"before": shared_time})
    assert [view["eventId"] for view in answer.json()["attempts"]] == expected[-2:]
    assert answer.json()["nextBefore"] is None
    cursor = writer.get(f"{APPS}/webhook-attempts", params={"limit": "2"}).json()[
        "nextBefore"]
    refused = writer.get(f"{APPS}/webhook-attempts", params={"before": cursor[:-8] + "!"})
    assert (refused.status_code, refused.json()["code"], refused.json()["field"]) == (
        422, "invalid_field", "before")


def test_bad_input_and_rate_limit(world: PayWorld, hook: FaultyReceiver,
                                  writer: httpx.Client) -> None:
    def code(response: httpx.Response) -> tuple[int, str]:
        return response.status_code, response.json()["code"]

    assert code(writer.post(f"{APPS}/webhooks", json={"url": hook.url, "events": ["x"]})) == (
        422, "invalid_events")
    assert code(writer.post(f"{APPS}/webhooks", json={"url": hook.url, "events": []})) == (
        422, "invalid_events")
    assert code(writer.post(f"{APPS}/webhooks", json={})) == (422, "missing_field")
    assert code(writer.post(f"{APPS}/webhooks", json={"url": 5})) == (422, "invalid_field")
    assert code(writer.post(f"{APPS}/webhooks", content=b"[]", headers={
        "content-type": "application/json"})) == (400, "invalid_json")
    assert code(writer.post(f"{APPS}/webhooks", content=b"url=x", headers={
        "content-type": "text/plain"})) == (415, "unsupported_media_type")
    webhook, _ = create_endpoint(writer, "game", hook.url)
    hid = webhook["id"]
    assert code(writer.patch(f"{APPS}/webhooks/{hid}", json={"enabled": "yes"})) == (
        422, "invalid_field")
    assert code(writer.patch(f"{APPS}/webhooks/zwh_nope", json={})) == (404, "webhook_not_found")
    assert code(writer.get(f"{APPS}/webhook-attempts?status=lost")) == (422, "invalid_field")
    assert code(writer.get(f"{APPS}/webhook-attempts?limit=0")) == (422, "invalid_field")
    # "\u00b2" is a digit to str.isdigit() but not to int() (a 500 once); Arabic-Indic
    # digits are read by int() but are not the wire's digits.
    for limit in ("\u00b2", "\u0661\u0660", "1" * 5000):
        assert code(writer.get(f"{APPS}/webhook-attempts", params={"limit": limit})) == (
            422, "invalid_field"), limit
    assert code(writer.get(f"{APPS}/webhook-attempts?before=yesterday")) == (
        422, "invalid_field")
    assert code(writer.post(f"{APPS}/webhook-attempts/zevt_nope/retry")) == (
        404, "webhook_attempt_not_found")
    assert code(writer.get("/api/developer/apps/other/webhooks")) == (404, "app_not_found")
    statuses = [writer.post(f"{APPS}/webhooks/{hid}/rotate").status_code for _ in range(30)]
    assert statuses[-1] == 429
    limited = writer.post(f"{APPS}/webhooks/{hid}/rotate")
    assert limited.json()["code"] == "rate_limited" and int(limited.headers["retry-after"]) > 0
