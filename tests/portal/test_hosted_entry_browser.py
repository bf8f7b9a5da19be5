"""The hosted entry in real Chromium: buy -> authorize -> sign -> return -> pay (spec 1.3).

A real router, the ledger, the webhook dispatcher and a wallet injected into the page
(``wallet_world``). The page shows the outcome as feedback only; the delivery is checked
with the backend's own key and the signed ``payment.delivered`` at a receiver on loopback.
"""

from __future__ import annotations

import re

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.ledger.flow import PARAMS
from tests.portal.wallet_world import (
    TestWallet,
    assert_clean,
    new_wallet,
    only_ours,
    portal_world,
    record_hosts,
    revoke_on_account_page,
)
from tests.support.browser import BrowserSession, screenshot
from tests.support.router import RouterFactory
from tests.webhooks.kit import FAST, console, create_endpoint, developer_of, receiver, wait_until

PERMIT_FIELDS = ["owner:address", "spender:address", "value:uint256", "nonce:uint256",
                 "deadline:uint256"]


def _shot(request: pytest.FixtureRequest, target: object, name: str) -> None:
    if request.node.callspec.params.get("db_url") == "sqlite":
        screenshot(target, f"portal-{name}")  # type: ignore[arg-type]


def assert_only_permit(wallet: TestWallet, spender: str, token: str) -> None:
    """Spec 1.10: the one typed data ever signed is the token's Permit to BudgetSpenderV2."""
    for data in wallet.typed:
        assert data["primaryType"] == "Permit"
        assert sorted(data["types"]) == ["EIP712Domain", "Permit"]
        assert [f"{f['name']}:{f['type']}" for f in data["types"]["Permit"]] == PERMIT_FIELDS
        assert sorted(data["message"]) == ["deadline", "nonce", "owner", "spender", "value"]
        assert data["message"]["spender"].lower() == spender.lower()
        assert data["domain"]["verifyingContract"].lower() == token.lower()


def test_buy_from_hosted_entry_authorizes_returns_and_pays(
        start_router: RouterFactory, sessions: sessionmaker[Session], chrome: BrowserSession,
        request: pytest.FixtureRequest) -> None:
    wallet = new_wallet(1).install(chrome.context)
    hosts = record_hosts(chrome)
    # The dispatcher runs in the server; the receiver is the reference one (signature
    # checked, granted once), on loopback with the dev switch for private URLs on.
    with portal_world(start_router, sessions, **FAST) as portal, receiver() as hook, \
            console(portal.world, developer_of(portal.world)) as developer:
        hook.secret = create_endpoint(developer, "game", hook.url)[1]
        page = chrome.new_page()
        page.goto(f"{portal.url}/game")
        # the script says what it found, then enables the buttons
        page.locator("#budget-status").get_by_text("No budget is authorized").wait_for()
        _shot(request, page, "hosted-entry")
        buy = page.get_by_role("button", name="Buy Retry / Continue · 0.01 USDC")
        buy.focus()
        page.keyboard.press("Enter")  # keyboard-usable: no mouse needed
        page.wait_for_url(re.compile(r".*/authorize\?app=game&return=.*"))
        assert page.locator("h1").inner_text() == "Authorize payments for Game"
        page.get_by_role("button", name="Connect wallet").click()
        page.get_by_label("Budget", exact=True).select_option("1000000")
        assert "up to 1.00 USDC" in page.locator("#plain-amount").inner_text()
        assert PARAMS.spender in page.inner_text("main")
        _shot(request, page, "authorize")
        page.get_by_role("button", name="Sign budget permit").click()
        page.wait_for_url(f"{portal.url}/game")  # back, and the code is gone from the URL
        result = page.locator("#result")
        result.get_by_text("Paid 0.01 USDC for Retry / Continue.").wait_for()
        text = result.inner_text()
        assert "budget left 0.99 USDC" in text
        delivery_id = re.search(r"Delivery (ztdlv_[0-9a-f]+)", text)
        assert delivery_id
        assert "code=" not in page.url
        _shot(request, page, "hosted-entry-paid")

        # the backend sees the delivery with its own key (the page proves nothing)
        with portal.world.keyed() as backend:
            delivery = backend.get(f"/api/deliveries/{delivery_id.group(1)}")
        assert delivery.status_code == 200, delivery.text
        assert delivery.json()["delivery"]["walletAddress"] == wallet.address
        assert delivery.json()["delivery"]["status"] == "delivered"
        # ... and the signed payment.delivered webhook fired and was granted once
        wait_until(lambda: delivery_id.group(1) in {d for _, d in hook.ledger.grants()},
                   what="the webhook grant")
        fired = [r for r in hook.requests if r.status == 200]
        assert fired[0].headers["x-svc-event"] == "payment.delivered"
        assert fired[0].headers["x-svc-delivery-id"] == delivery_id.group(1)

        # a second purchase uses the stored summary: no second trip to the wallet
        signed = len(wallet.typed) + len(wallet.texts)
        page.get_by_role("button", name="Buy Unlock Level · 0.03 USDC").click()
        page.locator("#result").get_by_text("Paid 0.03 USDC for Unlock Level.").wait_for()
        assert "0.96 USDC" in page.locator("#budget-status").inner_text()
        assert len(wallet.typed) + len(wallet.texts) == signed

        # Revoked on the account page: the next purchase fails and says why.
        revoke_on_account_page(chrome, portal)
        page.get_by_role("button", name="Buy Retry / Continue · 0.01 USDC").click()
        error = page.locator("#error")
        error.get_by_text("Your budget was revoked.").wait_for()
        assert error.get_by_role("button", name="Renew budget").is_visible()
        _shot(request, page, "hosted-entry-revoked")

    assert [t["message"]["value"] for t in wallet.typed] == ["1000000", "0"]
    assert_only_permit(wallet, PARAMS.spender, PARAMS.token)
    assert_clean(chrome)
    assert only_ours(hosts), hosts  # no third-party CDN, every file served by us
