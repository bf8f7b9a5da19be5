"""The recovery flow of spec 4.9 in the reference app's page, in real Chromium through the
router: the pending purchase survives a closed tab and a network failure, a stable error
clears it, a revoked budget asks for renewal and keeps it until the renewal finishes it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, Route
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction, utcnow
from payments.ledger.models import AuthCode, Charge, CodeKind
from tests.portal.wallet_world import assert_clean, new_wallet, wait_for
from tests.reference_app.browser_kit import (
    MODAL,
    PENDING_KEY,
    buy,
    card_state,
    inventory,
    modal_frame,
    open_app,
    outcome,
    pending,
    sign_with_dev_wallet,
)
from tests.reference_app.world import (
    PLAYER_ID,
    RefWorld,
    disable_webhook,
    reference_world,
    sqlite_store,
)
from tests.support.browser import BrowserSession
from tests.support.router import RouterFactory

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
ENDED = ("success", "failed", "stale", "stable", "retry", "renew", "cancelled", "waiting",
         "checking")


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session],
          tmp_path: Path) -> Iterator[RefWorld]:
    with reference_world(start_router, sessions, sqlite_store(tmp_path)) as running:
        yield running


def first_purchase(page: Page, world: RefWorld, product: str = "retry", *,
                   dev_wallet: bool = True) -> None:
    """Log in, buy ``product`` through the portal (connects the account), succeed."""
    open_app(page, world)
    wait_for(page, lambda: card_state(page) == "needs_connection")
    buy(page, product)
    wait_for(page, lambda: card_state(page) == "opening_portal")
    sign_with_dev_wallet(page, first=dev_wallet)
    assert outcome(page, *ENDED) and page.evaluate("document.body.dataset.outcome") == \
        "success", page.locator("#outcome").inner_text()
    wait_for(page, lambda: inventory(page).get(product) == 1)


def set_pending(page: Page, **fields: Any) -> dict[str, Any]:
    """A pending purchase as the page saves it (a purchase started and then interrupted)."""
    token = json.loads(page.evaluate("localStorage.getItem('refapp:session:game')"))["token"]
    started = page.evaluate("""async ([token, slug]) => (await (await fetch(
        "/api/svc/purchase", {method: "POST", headers: {"content-type": "application/json",
        authorization: "Bearer " + token}, body: JSON.stringify({productSlug: slug})})).json())
        .purchase""", [token, fields.pop("productSlug", "retry")])
    saved = {"productSlug": started["productSlug"], "orderId": None,
             "idempotencyKey": started["idempotencyKey"],
             "developerUserId": started["developerUserId"], "connectionId": None,
             "createdAt": started["createdAt"], **fields}
    page.evaluate("([key, value]) => localStorage.setItem(key, value)",
                  [PENDING_KEY, json.dumps(saved)])
    return saved


def reload(page: Page) -> None:
    page.evaluate("document.body.dataset.outcome = ''")
    page.reload()
    wait_for(page, lambda: page.evaluate("document.body.dataset.ready") == "1")


def test_tab_closes_after_the_portal_return_and_reopens(
        world: RefWorld, chrome: BrowserSession) -> None:
    first = chrome.new_page()
    open_app(first, world)
    wait_for(first, lambda: card_state(first) == "needs_connection")
    # The return arrives, but the tab's call to finish never gets out (it closes, the
    # network drops): a network failure keeps the pending purchase.
    first.route("**/api/svc/trusted-charge", lambda route: route.abort())
    buy(first, "gem")
    wait_for(first, lambda: card_state(first) == "opening_portal")
    sign_with_dev_wallet(first)
    assert outcome(first, *ENDED) and first.evaluate("document.body.dataset.outcome") == \
        "retry", first.locator("#outcome").inner_text()
    kept = pending(first)
    assert kept is not None and kept["productSlug"] == "gem"
    assert kept["connectionId"] and kept["connectionId"].startswith("zconn_")
    assert world.grants() == []  # nothing charged, nothing granted
    first.close()

    # A new tab: no summary code (sessionStorage is per tab), the pending purchase is in
    # localStorage; the handoff is ready on the same connection: a trusted charge finishes.
    again = chrome.new_page()
    again.goto(f"{world.runtime}/")
    assert outcome(again, *ENDED) and again.evaluate("document.body.dataset.outcome") == \
        "success", again.locator("#outcome").inner_text()
    assert again.evaluate("sessionStorage.length") == 0
    assert pending(again) is None
    wait_for(again, lambda: inventory(again) == {"gem": 1})
    grants = world.grants()
    # Granted once: by the charge's proof, or by its webhook when that landed first.
    assert len(grants) == 1 and grants[0].source in ("proof", "webhook"), grants
    assert grants[0].idempotency_key == "svc:" + kept["idempotencyKey"]
    assert_clean(chrome)


def test_network_failure_on_the_product_route_keeps_it_and_a_reload_finishes(
        world: RefWorld, chrome: BrowserSession) -> None:
    page = chrome.new_page()
    first_purchase(page, world)
    payments = world.router.settings.base_url + "/api/pay/**"

    def drop(route: Route) -> None:
        route.abort("internetdisconnected")
    page.route(payments, drop)
    buy(page, "unlock-level")  # ready: no portal, straight to the product route
    assert outcome(page, *ENDED) and page.evaluate("document.body.dataset.outcome") == \
        "retry", page.locator("#outcome").inner_text()
    kept = pending(page)
    assert kept is not None and kept["productSlug"] == "unlock-level"
    page.unroute(payments, drop)
    reload(page)
    assert outcome(page, *ENDED) and page.evaluate("document.body.dataset.outcome") == \
        "success", page.locator("#outcome").inner_text()
    assert pending(page) is None
    wait_for(page, lambda: inventory(page) == {"retry": 1, "unlock-level": 1})
    assert len(world.grants()) == 2


def test_a_lost_answer_of_the_product_route_is_found_again_on_reload(
        world: RefWorld, chrome: BrowserSession) -> None:
    """The request reaches the service, which charges; its answer never reaches the page.
    The webhook is late (held back), so only the page can finish. Here the reload's
    reconcile looked before the charge was committed (as if the request were still
    running), so the page retries the payment under the same key with a fresh payment code,
    gets the stored answer, and the grant follows from its delivery: paid once, granted
    once. (Without that race the reconcile finds the charge by key: the next test.)"""
    page = chrome.new_page()
    kept = charge_and_lose_the_answer(page, world)
    assert len(world.grants()) == 1  # charged, but not granted yet
    page.route("**/api/svc/reconcile", not_charged_yet)
    reload(page)
    text = outcome(page, *ENDED)
    assert page.evaluate("document.body.dataset.outcome") == "success", text
    assert pending(page) is None
    wait_for(page, lambda: inventory(page) == {"retry": 1, "unlock-level": 1})
    assert charged(world) == [10_000, 30_000]  # not again
    grants = world.grants()
    assert len(grants) == 2 and grants[1].idempotency_key == "svc:" + kept["idempotencyKey"]
    assert grants[1].source == "lookup"  # from the replayed answer's delivery id


def charge_and_lose_the_answer(page: Page, world: RefWorld) -> dict[str, Any]:
    """After a first purchase, unlock-level through the product route (ready, and no
    trusted charge for it) with the webhook held back: the service charges, and the page
    never hears its answer. Returns the purchase the page kept."""
    first_purchase(page, world)
    disable_webhook(world)
    payments = world.router.settings.base_url + "/api/pay/**"

    def lose(route: Route) -> None:
        route.fetch()  # the service charges...
        route.abort("connectionreset")  # ...and the page never hears it
    page.route(payments, lose)
    buy(page, "unlock-level")
    assert outcome(page, *ENDED) and page.evaluate("document.body.dataset.outcome") == \
        "retry", page.locator("#outcome").inner_text()
    kept = pending(page)
    assert kept is not None and kept["productSlug"] == "unlock-level"
    assert charged(world) == [10_000, 30_000]  # it was charged
    page.unroute(payments, lose)
    return kept


def not_charged_yet(route: Route) -> None:
    """The reconcile's answer when it looked before a charge under the key was committed."""
    route.fulfill(status=200, content_type="application/json", body=json.dumps(
        {"status": "not_charged", "granted": False, "grant": None}))


def test_a_lost_answer_and_a_lapsed_summary_are_found_by_key_on_reload(
        world: RefWorld, chrome: BrowserSession) -> None:
    """The product route charges, its answer is lost, the webhook is late, and by the
    reload the summary code has lapsed (over its lifetime): the page can no longer retry
    the payment. It must not say "Nothing was charged; buy again": the reconcile asks the
    service by key, finds the delivery and grants it, once; nothing is charged again.
    While the service cannot be asked, the purchase is kept and said to be checked."""
    page = chrome.new_page()
    kept = charge_and_lose_the_answer(page, world)
    lapse_summary_codes(world)

    # The app's server cannot reach the service for its lookup (as it answers then).
    def unreachable(route: Route) -> None:
        route.fulfill(status=503, content_type="application/json", body=json.dumps({
            "code": "service_unreachable", "retryable": True,
            "message": "The payment service could not be reached; try again."}))
    page.route("**/api/svc/reconcile", unreachable)
    reload(page)
    text = outcome(page, *ENDED)
    assert page.evaluate("document.body.dataset.outcome") == "checking", text
    assert "Nothing was charged" not in text and "Not paid" not in text
    assert pending(page) == kept  # kept, to be checked again
    page.unroute("**/api/svc/reconcile", unreachable)

    reload(page)
    text = outcome(page, *ENDED)
    assert page.evaluate("document.body.dataset.outcome") == "success", text
    assert pending(page) is None
    wait_for(page, lambda: inventory(page) == {"retry": 1, "unlock-level": 1})
    assert charged(world) == [10_000, 30_000]  # not again
    grants = world.grants()
    assert [g.idempotency_key for g in grants][1:] == ["svc:" + kept["idempotencyKey"]]
    assert grants[1].source == "reconcile"  # found by key: the webhook is still held back


def lapse_summary_codes(world: RefWorld) -> None:
    """Every summary code past its lifetime, as if the reload came after it."""
    with transaction(world.sessions) as session:
        session.execute(update(AuthCode).where(AuthCode.kind == CodeKind.SUMMARY).values(
            expires_at=utcnow() - timedelta(seconds=1)))


def test_a_key_the_service_already_charged_keeps_the_purchase(
        world: RefWorld, chrome: BrowserSession) -> None:
    """IDEMPOTENCY_KEY_REUSED on the page's own key means the service holds a charge under
    it (here: the key was paid for another product, the webhook held back, and the charge
    landed after the reconcile looked): never "Not paid", never a new key; the purchase
    waits, and the next load's reconcile finds the charge by key and grants it."""
    page = chrome.new_page()
    first_purchase(page, world)
    disable_webhook(world)
    saved = set_pending(page, productSlug="unlock-level")
    # The tab's summary code (from the first purchase's return): pay ``retry`` under the
    # pending key, from the runtime origin it belongs to, as the page would.
    summary_code = page.evaluate("sessionStorage.getItem('svc:auth-summary:game')")
    with world.api(origin=world.runtime) as api:
        summary = api.get("/api/authorizations/summary", params={"code": summary_code}).json()
        code = api.post("/api/authorizations/payment-code", json={
            "authorizationCode": summary_code, "paymentUrl": world.payment_url("retry"),
            "idempotencyKey": saved["idempotencyKey"]}).json()["authorization"]
        paid = api.post(f"/api/pay/{world.app.slug}/retry", headers={
            "x-wallet-address": summary["ownerWallet"], "x-svc-budget-spender": summary[
                "spender"]}, json={
            "authorizationCode": code["authorizationCode"],
            "idempotencyKey": saved["idempotencyKey"], "developerUserId": PLAYER_ID})
    assert paid.status_code == 201, paid.text

    # The reconcile looked before that charge landed (a race no lookup rules out).
    page.route("**/api/svc/reconcile", not_charged_yet)
    reload(page)
    text = outcome(page, *ENDED)
    assert page.evaluate("document.body.dataset.outcome") == "waiting", text
    assert "IDEMPOTENCY_KEY_REUSED" in text and "Not paid" not in text
    kept = pending(page)
    assert kept is not None and kept["idempotencyKey"] == saved["idempotencyKey"]  # kept
    assert charged(world) == [10_000, 10_000]  # the refusal charged nothing
    page.unroute("**/api/svc/reconcile", not_charged_yet)
    reload(page)
    assert outcome(page, *ENDED) and page.evaluate(
        "document.body.dataset.outcome") == "success", page.locator("#outcome").inner_text()
    assert pending(page) is None
    assert charged(world) == [10_000, 10_000]
    grants = world.grants()
    assert grants[-1].delivery_id == paid.json()["deliveryId"]
    assert grants[-1].source == "reconcile"


def charged(world: RefWorld) -> list[int]:
    """The amounts the service charged, in order."""
    with world.sessions() as session:
        return list(session.scalars(select(Charge.amount_atomic).order_by(Charge.seq)))


@pytest.mark.parametrize("error", ["AUTHORIZATION_CODE_INTENT_MISMATCH",
                                   "ACCOUNT_CONNECTION_MISMATCH"])
def test_a_stable_error_clears_the_pending_purchase(
        world: RefWorld, chrome: BrowserSession, error: str) -> None:
    page = chrome.new_page()
    first_purchase(page, world)
    if error == "AUTHORIZATION_CODE_INTENT_MISMATCH":
        # the saved order is for another product than the saved slug
        token = json.loads(page.evaluate(
            "localStorage.getItem('refapp:session:game')"))["token"]
        with world.app_client(token) as client:
            order = client.post("/api/svc/order", json={"productSlug": "unlock-level"})
        set_pending(page, productSlug="retry", orderId=order.json()["order"]["id"])
    else:
        # saved for an account connection that is not the one the portal returned
        set_pending(page, productSlug="retry", connectionId="zconn_" + "0" * 30)
    reload(page)
    text = outcome(page, *ENDED)
    assert page.evaluate("document.body.dataset.outcome") == "stable", text
    assert error in text
    assert pending(page) is None  # cleared
    assert len(world.grants()) == 1  # only the first purchase
    wait_for(page, lambda: inventory(page) == {"retry": 1})


def test_a_lapsed_summary_or_no_way_to_finish_clears_it(
        world: RefWorld, chrome: BrowserSession) -> None:
    page = chrome.new_page()
    first_purchase(page, world)
    page.evaluate("sessionStorage.setItem('svc:auth-summary:game', 'sum_' + '0'.repeat(48))")
    set_pending(page, productSlug="retry")
    reload(page)
    text = outcome(page, *ENDED)
    assert page.evaluate("document.body.dataset.outcome") == "stale", text
    assert "Nothing was charged" in text  # the service said so: no delivery under the key
    assert pending(page) is None
    assert len(world.grants()) == 1


def test_a_revoked_budget_asks_for_renewal_and_keeps_the_purchase(
        world: RefWorld, chrome: BrowserSession) -> None:
    wallet = new_wallet(31).install(chrome.context)  # an extension wallet this time
    page = chrome.new_page()
    first_purchase(page, world, dev_wallet=False)
    revoke(chrome, world)
    # The tab's summary is stale now: finishing a saved purchase hits the revoked budget.
    saved = set_pending(page, productSlug="retry")
    reload(page)
    text = outcome(page, *ENDED)
    assert page.evaluate("document.body.dataset.outcome") == "renew", text
    assert "AUTHORIZATION_REVOKED" in text and "Renew" in text
    kept = pending(page)
    assert kept is not None and kept["idempotencyKey"] == saved["idempotencyKey"]  # kept
    wait_for(page, lambda: card_state(page) == "budget_revoked")
    # Renew in the modal (renew=1); the return finishes the kept purchase.
    page.evaluate("document.body.dataset.outcome = ''")
    page.locator("#wallet .actions button", has_text="Renew budget").click()
    frame = modal_frame(page)
    assert "renew=1" in frame.url
    modal = page.frame_locator(MODAL)
    modal.get_by_role("button", name="Connect wallet").click()
    modal.get_by_role("button", name="Sign budget permit").click()
    text = outcome(page, *ENDED)
    assert page.evaluate("document.body.dataset.outcome") == "success", text
    assert pending(page) is None
    wait_for(page, lambda: inventory(page) == {"retry": 2})
    assert [t["message"]["value"] != "0" for t in wallet.typed] == [True, False, True]
    assert len(world.grants()) == 2


def revoke(chrome: BrowserSession, world: RefWorld) -> None:
    account = chrome.new_page()
    account.goto(f"{world.router.settings.portal_url}/account")
    account.get_by_role("button", name="Connect wallet").click()
    account.locator("#budget-state").wait_for()
    account.get_by_role("button", name="Revoke budget").click()
    account.get_by_text("Budget revoked. Apps can no longer charge it.").wait_for()
    account.close()


def test_buying_with_a_revoked_budget_opens_the_renewal(
        world: RefWorld, chrome: BrowserSession) -> None:
    new_wallet(32).install(chrome.context)
    page = chrome.new_page()
    first_purchase(page, world, dev_wallet=False)
    revoke(chrome, world)
    buy(page, "unlock-level")
    wait_for(page, lambda: card_state(page) == "opening_portal")
    assert "renew=1" in modal_frame(page).url  # the handoff says needs_budget
    assert pending(page) is not None  # saved before the portal opened
    modal = page.frame_locator(MODAL)
    modal.get_by_role("button", name="Connect wallet").click()
    modal.get_by_role("button", name="Sign budget permit").click()
    wait_for(page, lambda: page.evaluate("document.body.dataset.outcome") == "success")
    wait_for(page, lambda: inventory(page) == {"retry": 1, "unlock-level": 1})
    assert pending(page) is None


def test_a_full_page_portal_return_finishes_on_load(
        world: RefWorld, chrome: BrowserSession) -> None:
    page = chrome.new_page()
    open_app(page, world)
    saved = set_pending(page, productSlug="gem")
    token = json.loads(page.evaluate("localStorage.getItem('refapp:session:game')"))["token"]
    with world.app_client(token) as client:
        portal_url = client.post("/api/svc/account-handoff", json={}).json()["handoff"][
            "portalUrl"]
    page.goto(portal_url)  # the whole tab goes to the portal, not the modal
    page.get_by_role("button", name="Connect wallet").click()
    page.get_by_role("button", name="Use dev wallet (test funds, dev mode only)").click()
    page.get_by_role("button", name="Sign budget permit").click()
    # back through /svc-auth-return to the entry path, where the page finishes the purchase
    page.wait_for_url(f"{world.runtime}/")
    wait_for(page, lambda: page.evaluate("document.body.dataset.ready") == "1")
    text = outcome(page, *ENDED)
    assert page.evaluate("document.body.dataset.outcome") == "success", text
    assert pending(page) is None
    wait_for(page, lambda: inventory(page) == {"gem": 1})
    grants = world.grants()
    assert len(grants) == 1 and grants[0].idempotency_key == "svc:" + saved["idempotencyKey"]
    assert_clean(chrome)
