"""The app-owned routes of spec 4.9 against the real service: the page and manifest,
sessions, payment-submitted (trusted lookup, verified proof), reconcile, trusted-charge,
order, account-handoff and inventory; bad input in the envelope, never a 500."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from svc.backend import BackendClient
from tests.ledger.flow import connect, wallet
from tests.reference_app.world import (
    PLAYER_ID,
    RefWorld,
    disable_webhook,
    payer,
    reference_world,
    sqlite_store,
    wait_for_value,
)
from tests.sdk.proxy import body_of, with_body
from tests.support.router import RouterFactory
from tests.webhooks.kit import FAST, attempts, events

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def call(world: RefWorld, token: str | None, path: str, body: Any = None) -> httpx.Response:
    with world.app_client(token) as client:
        return client.post(path, json=body if body is not None else {})


def test_page_manifest_and_refusals(ref: RefWorld) -> None:
    with ref.app_client() as client:
        manifest = client.get("/.well-known/svc.json").json()
        page = client.get("/")
        script = client.get("/static/app.js")
        icon = client.get("/static/favicon.svg")
        unknown = client.get("/static/../settings.py")
    # an icon of its own: no browser asks for /favicon.ico and logs its 404 on every load
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in page.text
    assert (icon.status_code, icon.headers["content-type"]) == (200, "image/svg+xml")
    assert icon.text.startswith("<svg ")
    assert manifest == {"appId": ref.app.id, "slug": "game", "payTo": ref.config.pay_to,
                        "webhookPath": "/api/svc/webhook",
                        "paymentSubmittedPath": "/api/svc/payment-submitted",
                        "appPath": "/", "entryPath": "/", "runtimeOrigin": ref.origin}
    csp = page.headers["content-security-policy"]
    assert "script-src 'self' " + ref.router.settings.portal_url in csp
    assert "'unsafe-inline'" not in csp and "frame-ancestors 'none'" in csp
    assert f'src="{ref.router.settings.portal_url}/sdk/svc-modal.js"' in page.text
    for secret in (ref.hook_secret, ref.api_key):
        assert secret not in page.text and secret not in script.text
    assert "<script>" not in page.text  # no inline script: data goes in a JSON block
    assert unknown.status_code == 404
    # served through the router on the app's runtime host too
    with ref.router.client("game") as proxied:
        assert proxied.get("/.well-known/svc.json").json()["appId"] == ref.app.id
    # the runtime verifier's probes: unsigned webhook 401, unauthenticated callback 4xx
    assert call(ref, None, "/api/svc/webhook").status_code == 401
    assert call(ref, None, "/api/svc/payment-submitted").status_code == 401
    # bad input is the envelope, never a 500
    token = ref.log_in()
    with ref.app_client(token) as client:
        as_text = client.post("/api/svc/reconcile", content=b"{", headers={
            "content-type": "application/json"})
        as_form = client.post("/api/svc/reconcile", data={"deliveryId": "x"})
        as_list = client.post("/api/svc/reconcile", json=[1])
    assert (as_text.status_code, as_text.json()["code"]) == (400, "invalid_json")
    assert (as_form.status_code, as_form.json()["code"]) == (415, "unsupported_media_type")
    assert (as_list.status_code, as_list.json()["code"]) == (400, "invalid_json")
    for body, code in (({}, "missing_field"), ({"deliveryId": "zord_1"}, "invalid_field"),
                       ({"deliveryId": 5}, "invalid_field")):
        answer = call(ref, token, "/api/svc/reconcile", body)
        assert (answer.status_code, answer.json()["code"]) == (422, code), answer.text
    assert call(ref, token, "/api/svc/purchase", {"productSlug": "nope"}).status_code == 404
    assert call(ref, "forged.token", "/api/svc/reconcile",
                {"deliveryId": "ztdlv_1"}).json()["code"] == "login_required"
    assert call(ref, None, "/api/session", {"name": "<script>"}).status_code == 422


def test_payment_submitted_lookup_then_the_webhook_arrives_after(ref: RefWorld) -> None:
    disable_webhook(ref)  # the webhook is held back: the callback comes first
    paid = payer(ref, 11).pay("retry", "submit-1")
    token = ref.log_in()
    first = call(ref, token, "/api/svc/payment-submitted", {"deliveryId": paid["deliveryId"]})
    assert first.status_code == 200, first.text
    assert first.json()["granted"] is True and first.json()["grant"]["source"] == "lookup"
    again = call(ref, token, "/api/svc/payment-submitted", {"deliveryId": paid["deliveryId"]})
    assert again.json()["granted"] is False
    # now the webhook: the skipped event retried by hand, under its own event id
    let_the_skipped_webhook_through(ref, "the retried webhook")
    grants = ref.grants()
    assert len(grants) == 1 and grants[0].source == "lookup"
    unknown = call(ref, token, "/api/svc/payment-submitted", {"deliveryId": "ztdlv_" + "0" * 30})
    assert (unknown.status_code, unknown.json()["code"]) == (404, "not_found")


def test_webhook_before_the_callback_and_reconcile_by_id_or_key(ref: RefWorld) -> None:
    paid = payer(ref, 12).pay("unlock-level", "ref:unlock-level:before")
    wait_for_value(lambda: ref.grants(), "the webhook grant")  # the webhook came first
    token = ref.log_in()
    late = call(ref, token, "/api/svc/payment-submitted", {"deliveryId": paid["deliveryId"]})
    assert late.json()["granted"] is False and late.json()["grant"]["source"] == "webhook"
    for body in ({"deliveryId": paid["deliveryId"]},
                 {"idempotencyKey": "ref:unlock-level:before"},  # as the app sent it
                 {"idempotencyKey": "svc:ref:unlock-level:before"}):  # as the delivery has it
        found = call(ref, token, "/api/svc/reconcile", body)
        assert found.status_code == 200, found.text
        assert found.json()["status"] == "granted" and found.json()["granted"] is False
        assert found.json()["grant"]["deliveryId"] == paid["deliveryId"]
    nosy = call(ref, ref.log_in("Somebody Else"), "/api/svc/reconcile",
                {"deliveryId": paid["deliveryId"]})
    assert (nosy.status_code, nosy.json()["code"]) == (404, "not_found")  # not theirs
    unknown = call(ref, token, "/api/svc/reconcile", {"idempotencyKey": "ref:x:never"})
    assert unknown.json() == {"status": "not_charged", "granted": False, "grant": None}
    inventory = httpx.get(f"{ref.origin}/api/inventory",
                          headers={"authorization": f"Bearer {token}"}).json()
    assert inventory == {"developerUserId": PLAYER_ID, "items": [
        {"productId": ref.products["unlock-level"].id, "productSlug": "unlock-level",
         "name": "Unlock Level", "count": 1}]}
    other = ref.log_in("Somebody Else")
    assert httpx.get(f"{ref.origin}/api/inventory", headers={
        "authorization": f"Bearer {other}"}).json()["items"] == []


def test_reconcile_by_key_finds_a_charge_the_webhook_has_not_reported(ref: RefWorld) -> None:
    """The answer was lost and the webhook is late: the key alone finds the delivery on the
    service (the lookup by key) and grants it once; ``not_charged`` only for a key the
    service holds no delivery under."""
    disable_webhook(ref)
    token = ref.log_in()
    paid = payer(ref, 14).pay("unlock-level", "ref:unlock-level:lost")
    assert ref.grants() == []
    found = call(ref, token, "/api/svc/reconcile", {"idempotencyKey": "ref:unlock-level:lost"})
    assert found.status_code == 200, found.text
    assert found.json()["granted"] is True and found.json()["grant"]["source"] == "reconcile"
    assert found.json()["grant"]["deliveryId"] == paid["deliveryId"]
    again = call(ref, token, "/api/svc/reconcile",
                 {"idempotencyKey": "svc:ref:unlock-level:lost"})  # the delivery's form
    assert again.json()["granted"] is False
    # the webhook, let through late, grants nothing more: one grant per delivery and key
    let_the_skipped_webhook_through(ref, "the late webhook")
    assert [(g.delivery_id, g.source) for g in ref.grants()] == [
        (paid["deliveryId"], "reconcile")]  # once
    disable_webhook(ref)
    # settled_first: paid, not to be granted yet; the page keeps it with its delivery id
    scarce = payer(ref, 15).pay("relic", "ref:relic:lost")
    early = call(ref, token, "/api/svc/reconcile", {"idempotencyKey": "ref:relic:lost"})
    assert (early.status_code, early.json()["code"]) == (409, "delivery_not_ready")
    assert early.json()["deliveryId"] == scarce["deliveryId"] and early.json()["retryable"]
    # another player's key: not theirs to see, and nothing granted to the asker
    payer(ref, 16).pay("retry", "ref:retry:theirs", user="somebody-else")
    nosy = call(ref, token, "/api/svc/reconcile", {"idempotencyKey": "ref:retry:theirs"})
    assert (nosy.status_code, nosy.json()["code"]) == (404, "not_found")
    never = call(ref, token, "/api/svc/reconcile", {"idempotencyKey": "ref:retry:never"})
    assert never.json() == {"status": "not_charged", "granted": False, "grant": None}
    assert [g.delivery_id for g in ref.grants()] == [paid["deliveryId"]]


@pytest.mark.parametrize("fault", ["dropped", "route_missing"])
def test_reconcile_by_key_that_cannot_ask_never_says_not_charged(
        start_router: RouterFactory, sessions: sessionmaker[Session], tmp_path: Path,
        fault: str) -> None:
    """No answer from the service, or the bare 404 of a service without the lookup by key:
    an error the page keeps the purchase on, never ``not_charged``."""
    def lose(n: int, request: bytes, response: bytes) -> bytes | None:
        if fault == "dropped":
            return None
        return with_body(response.replace(b" 200 OK", b" 404 Not Found", 1), json.dumps(
            {"code": "not_found", "message": "Not Found"}).encode())

    with reference_world(start_router, sessions, sqlite_store(tmp_path),
                         api_proxy=lose) as world:
        disable_webhook(world)
        payer(world, 17).pay("retry", "ref:retry:asked")
        token = world.log_in()
        answer = call(world, token, "/api/svc/reconcile", {"idempotencyKey": "ref:retry:asked"})
        assert answer.status_code in (404, 503), answer.text
        assert answer.json()["code"] == ("service_unreachable" if fault == "dropped"
                                         else "not_found")
        assert answer.json().get("status") is None and world.grants() == []


def test_app_killed_between_charge_and_grant_then_reconcile_grants_once(
        start_router: RouterFactory, sessions: sessionmaker[Session], tmp_path: Path) -> None:
    slow = {**FAST, "webhook_retry_delays": (2.0,) * 7}
    with reference_world(start_router, sessions, sqlite_store(tmp_path), **slow) as world:
        assert world.server is not None
        world.server.stop()  # killed: the charge goes through, its webhook cannot land
        paid = payer(world, 13).pay("retry", "killed-1")
        wait_for_value(lambda: [a for a in attempts(sessions).values()
                                if a.response_status == 522], "the failed webhook")
        world.server.start()
        token = world.log_in()
        answer = call(world, token, "/api/svc/reconcile", {"deliveryId": paid["deliveryId"]})
        assert answer.status_code == 200, answer.text
        assert answer.json()["granted"] is True and answer.json()["grant"]["source"] == "reconcile"
        # the service's retry lands later and grants nothing more
        wait_for_value(lambda: [a for a in attempts(sessions).values()
                                if a.response_status == 200], "the retried webhook")
        again = call(world, token, "/api/svc/reconcile", {"deliveryId": paid["deliveryId"]})
        assert again.json()["granted"] is False
        assert [g.delivery_id for g in world.grants()] == [paid["deliveryId"]]


def test_trusted_charge_account_handoff_and_order(ref: RefWorld) -> None:
    token = ref.log_in()
    before = call(ref, token, "/api/svc/account-handoff")
    assert before.status_code == 200, before.text
    assert before.json()["status"] == "needs_connection"
    assert before.json()["handoff"]["portalUrl"].startswith(ref.router.settings.portal_url)
    not_ready = call(ref, token, "/api/svc/trusted-charge",
                     {"productSlug": "gem", "idempotencyKey": "ref:gem:1"})
    assert (not_ready.status_code, not_ready.json()["code"]) == (409, "handoff_not_ready")

    account = wallet(14)
    connect(ref, account, PLAYER_ID, 1_000_000)
    ready = call(ref, token, "/api/svc/account-handoff")
    assert ready.json()["status"] == "ready"
    # the client-safe projection only (spec 4.5): never the authorization or its code
    assert set(ready.json()) == {"status", "handoff", "connection"}
    assert set(ready.json()["connection"]) == {"id", "status", "ownerWallet",
                                               "budgetRemaining", "boundAt"}
    assert "sum_" not in ready.text and "authorizationCode" not in ready.text
    connection = ready.json()["connection"]["id"]

    wrong = call(ref, token, "/api/svc/trusted-charge", {
        "productSlug": "gem", "idempotencyKey": "ref:gem:1", "accountConnectionId": "zconn_x"})
    assert (wrong.status_code, wrong.json()["code"]) == (409, "ACCOUNT_CONNECTION_MISMATCH")
    charged = call(ref, token, "/api/svc/trusted-charge", {
        "productSlug": "gem", "idempotencyKey": "ref:gem:1", "accountConnectionId": connection})
    assert charged.status_code == 201, charged.text
    assert charged.json()["granted"] is True and charged.json()["grant"]["source"] == "proof"
    assert charged.json()["remaining"] == "980000"
    retried = call(ref, token, "/api/svc/trusted-charge", {
        "productSlug": "gem", "idempotencyKey": "ref:gem:1", "accountConnectionId": connection})
    assert retried.status_code == 200 and retried.json()["granted"] is False
    assert call(ref, token, "/api/svc/account-handoff").json()["connection"][
        "budgetRemaining"] == "980000"  # charged once
    refused = call(ref, token, "/api/svc/trusted-charge",
                   {"productSlug": "retry", "idempotencyKey": "ref:retry:1"})
    assert (refused.status_code, refused.json()["code"]) == (403, "TRUSTED_CHARGE_NOT_ALLOWED")
    # a settled_first product is paid but not granted before the chain settles (spec 1.6)
    scarce = call(ref, token, "/api/svc/trusted-charge",
                  {"productSlug": "relic", "idempotencyKey": "ref:relic:1"})
    assert scarce.status_code == 202, scarce.text
    assert scarce.json()["status"] == "pending" and scarce.json()["grant"] is None
    assert scarce.json()["deliveryStatus"] == "awaiting_settlement"
    early = call(ref, token, "/api/svc/reconcile", {"deliveryId": scarce.json()["deliveryId"]})
    assert (early.status_code, early.json()["code"]) == (409, "delivery_not_ready")
    # the webhook of the charge arrives too, and grants nothing more
    wait_for_value(lambda: [a for a in attempts(ref.sessions).values()
                            if a.response_status == 200], "the charge's webhook")
    assert len(ref.grants()) == 1

    order = call(ref, token, "/api/svc/order", {"productSlug": "unlock-level"})
    assert order.status_code == 201, order.text
    made = order.json()["order"]
    assert made["id"].startswith("zord_") and made["status"] == "created"
    assert made["amountAtomic"] == "30000"
    with BackendClient(ref.router.settings.base_url, ref.api_key) as backend:
        seen = backend.get_order(made["id"])
    assert (seen.product_id, seen.developer_user_id) == (ref.products["unlock-level"].id,
                                                         PLAYER_ID)


def test_payment_proof_verified_tampered_refused(ref: RefWorld) -> None:
    disable_webhook(ref)
    account = wallet(15)
    bound = connect(ref, account, PLAYER_ID, 1_000_000)
    with BackendClient(ref.router.settings.base_url, ref.api_key) as backend:
        charge = backend.create_trusted_charge(
            product_id=ref.products["gem"].id,
            account_connection_id=bound["summary"]["accountConnectionId"],
            developer_user_id=PLAYER_ID, idempotency_key="proof-1")
    proof = charge.raw["paymentProof"]
    token = ref.log_in()
    tampered = copy.deepcopy(proof)
    tampered["payload"]["amountAtomic"] = "1"
    foreign = copy.deepcopy(proof)
    foreign["signature"] = "sha256=" + "0" * 64
    for bad in (tampered, foreign, {"scheme": "other"}, "not an object"):
        refused = call(ref, token, "/api/svc/payment-submitted", {"paymentProof": bad})
        assert (refused.status_code, refused.json()["code"]) == (422, "payment_proof_invalid")
    assert ref.grants() == []
    good = call(ref, token, "/api/svc/payment-submitted", {"paymentProof": proof})
    assert good.status_code == 200, good.text
    assert good.json()["granted"] is True and good.json()["grant"]["source"] == "proof"
    assert good.json()["grant"]["deliveryId"] == charge.delivery.id
    assert call(ref, token, "/api/svc/payment-submitted",
                {"paymentProof": proof}).json()["granted"] is False



def test_trusted_charge_with_a_changed_proof_grants_nothing(
        start_router: RouterFactory, sessions: sessionmaker[Session], tmp_path: Path) -> None:
    def tamper(n: int, request: bytes, response: bytes) -> bytes:
        if b'"accountConnectionId"' not in request or b"paymentProof" not in response:
            return response
        answer = json.loads(body_of(response))
        answer["paymentProof"]["payload"]["amountAtomic"] = "1"  # a cheaper charge, claimed
        answer["amountAtomic"] = "1"
        return with_body(response, json.dumps(answer).encode())

    with reference_world(start_router, sessions, sqlite_store(tmp_path),
                         api_proxy=tamper) as world:
        disable_webhook(world)  # only the proof could grant here
        connect(world, wallet(16), PLAYER_ID, 1_000_000)
        token = world.log_in()
        refused = call(world, token, "/api/svc/trusted-charge",
                       {"productSlug": "gem", "idempotencyKey": "ref:gem:tampered"})
        assert refused.status_code == 502, refused.text
        assert refused.json()["code"] == "payment_proof_invalid"
        assert world.grants() == []
        # what the service really recorded is still granted once, from a trusted lookup
        with BackendClient(world.router.settings.base_url, world.api_key) as backend:
            charge_event = [e for e in events(sessions) if e.type == "payment.delivered"]
            delivery = backend.get_delivery(charge_event[0].payload["delivery"]["deliveryId"])
        synced = call(world, token, "/api/inventory/sync", {"deliveryIds": [delivery.id]})
        assert synced.status_code == 200, synced.text
        assert synced.json()["synced"] == [{"deliveryId": delivery.id, "status": "granted"}]
        assert synced.json()["items"] == [{"productId": world.products["gem"].id,
                                           "productSlug": "gem", "name": "Gem", "count": 1}]
        assert [g.amount_atomic for g in world.grants()] == [20_000]


def let_the_skipped_webhook_through(ref: RefWorld, what: str) -> None:
    """Enable the endpoint again and retry the first event it skipped, by hand, under its
    own event id; wait until the receiver has answered it 200."""
    disable_webhook(ref, enabled=True)
    event_id = next(iter(attempts(ref.sessions)))
    with ref.developer() as developer:
        developer.post(f"/api/developer/apps/game/webhook-attempts/{event_id}/retry"
                       ).raise_for_status()
    wait_for_value(lambda: [a for a in attempts(ref.sessions).values()
                            if a.response_status == 200], what)
