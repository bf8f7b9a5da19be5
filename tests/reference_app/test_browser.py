"""The reference app in real Chromium through the router, end to end: buy with the dev
wallet in the runtime modal -> charge -> signed webhook -> the inventory shows the item
once -> ``payment.settled`` after the settlement worker -> ``pay_to`` got the price on the
in-process chain."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from payments.ledger.models import AttemptStatus
from tests.portal.wallet_world import assert_clean, only_ours, record_hosts, wait_for
from tests.reference_app.browser_kit import (
    buy,
    card_state,
    inventory,
    open_app,
    outcome,
    pending,
    sign_with_dev_wallet,
    usdc_balance,
)
from tests.reference_app.world import PLAYER_ID, reference_world, sqlite_store, wait_for_value
from tests.support.browser import BrowserSession, screenshot
from tests.support.router import RouterFactory
from tests.webhooks.kit import attempts, events

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def test_buy_deliver_settle_and_pay_to_is_paid(
        start_router: RouterFactory, sessions: sessionmaker[Session], tmp_path: Path,
        chrome: BrowserSession) -> None:
    hosts = record_hosts(chrome)
    with reference_world(start_router, sessions, sqlite_store(tmp_path), chain_workers=True,
                         chain_worker_interval=0.1, settlement_batch_age_seconds=0.0) as world:
        pay_to = world.config.pay_to
        before = usdc_balance(world, pay_to)
        page = chrome.new_page()
        open_app(page, world)
        wait_for(page, lambda: card_state(page) == "needs_connection")
        assert inventory(page) == {}
        assert not [m for m in chrome.log.messages if "favicon" in m[2]]  # no 404 logged
        buy(page, "retry")
        wait_for(page, lambda: card_state(page) == "opening_portal")
        saved = pending(page)  # saved before the portal opened
        assert saved is not None and saved["productSlug"] == "retry"
        assert saved["developerUserId"] == PLAYER_ID
        assert saved["idempotencyKey"].startswith("ref:retry:") and saved["createdAt"]
        sign_with_dev_wallet(page)
        text = outcome(page, "success", "failed", "stale", "stable", "retry", "renew")
        assert page.evaluate("document.body.dataset.outcome") == "success", text
        assert pending(page) is None  # cleared on success
        wait_for(page, lambda: inventory(page) == {"retry": 1})
        screenshot(page, "reference-app-purchased")

        grants = world.grants()
        assert len(grants) == 1 and grants[0].product_slug == "retry"
        delivery_id = grants[0].delivery_id
        # the signed payment.delivered reached the app and granted nothing more
        wait_for_value(lambda: [a for a in attempts(sessions).values()
                                if a.status == AttemptStatus.DELIVERED], "payment.delivered")
        assert len(world.grants()) == 1

        def settled() -> dict[str, object] | None:
            store = world.store()
            try:
                return store.settlement(delivery_id)
            finally:
                store.engine.dispose()
        recorded = wait_for_value(settled, "payment.settled at the app", timeout=90)
        assert [e.type for e in events(sessions)] == ["payment.delivered", "payment.settled"]
        assert str(recorded["tx_hash"]).startswith("0x")
        assert usdc_balance(world, pay_to) == before + 10_000  # the price, on chain

        # a reload shows the same inventory: it is the server's, not the page's
        page.reload()
        wait_for(page, lambda: page.evaluate("document.body.dataset.ready") == "1")
        wait_for(page, lambda: inventory(page) == {"retry": 1})
    assert_clean(chrome)
    assert only_ours(hosts), hosts
