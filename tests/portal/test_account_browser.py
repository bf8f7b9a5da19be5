"""The account page in real Chromium (spec 4.7, 1.9): Global Budget from the ledger, connected
apps and spend records only after a gas-free wallet proof kept for the browser session,
unlink, renew and revoke."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.ledger.models import AccountConnection, AuthorizationStatus, ConnectionStatus
from tests.ledger.flow import connect, start_handoff
from tests.portal.wallet_world import (
    alter_permits,
    assert_clean,
    new_wallet,
    portal_world,
    wait_for,
)
from tests.support.browser import BrowserSession, screenshot
from tests.support.router import RouterFactory


def _shot(request: pytest.FixtureRequest, target: Any, name: str) -> None:
    if request.node.callspec.params.get("db_url") == "sqlite":
        screenshot(target, f"portal-{name}")


def test_account_page_before_and_after_the_wallet_proof(
        start_router: RouterFactory, sessions: sessionmaker[Session], chrome: BrowserSession,
        request: pytest.FixtureRequest) -> None:
    wallet = new_wallet(4).install(chrome.context)
    with portal_world(start_router, sessions) as portal:
        world = portal.world
        # The wallet's history, made through the API: a bound game account and one purchase.
        returned = connect(world, wallet.account, "player-7", 2_000_000)
        code = world.payment_code(returned["code"], "retry")
        with world.api(origin=world.audience) as api:
            assert world.pay(api, wallet.account, "retry", code, "k-1").status_code == 201

        page = chrome.new_page()
        page.goto(f"{portal.url}/account")
        assert "Connect your wallet to see your budget." in page.inner_text("#budget")
        page.get_by_role("button", name="Connect wallet").click()
        page.locator("#budget-state").wait_for()
        assert page.inner_text("#remaining") == "1.99 USDC of 2.00 USDC"
        assert page.inner_text("#budget-state") == "Active"
        # connected apps and spend stay hidden until the proof
        assert "stay hidden until you verify" in page.inner_text("#connected")
        assert page.locator("#connections").count() == 0
        assert "Player One" not in page.inner_text("main")
        _shot(request, page, "account-before-proof")

        page.get_by_role("button", name="Verify wallet").click()
        page.locator("#connections").wait_for()
        assert wallet.texts[-1].startswith("Verify wallet ownership for the payment portal.")
        assert "This is not a payment" in wallet.texts[-1]
        row = page.locator("#connections tbody tr")
        assert row.count() == 1 and "Player One" in row.inner_text()
        spend = page.locator("#spend-records tbody tr")
        assert spend.count() == 1
        assert "Retry / Continue" in spend.inner_text() and "0.01 USDC" in spend.inner_text()
        assert page.locator("#budget-state").inner_text() == "Active"
        _shot(request, page, "account-verified")

        # The proof is kept for the browser session: HttpOnly, portal host only, no Max-Age.
        cookie = next(c for c in chrome.context.cookies() if c["name"] == "svc_portal_wallet")
        assert cookie["httpOnly"] is True
        assert cookie["sameSite"] == "Strict"
        assert cookie["domain"] == "portal.localhost"  # host-only: no leading dot
        assert cookie["expires"] == -1  # a session cookie
        proofs = len(wallet.texts)
        page.reload()
        page.locator("#connections").wait_for()
        assert len(wallet.texts) == proofs  # no second signature

        # Renew from the account page: a new permit replaces the budget for every app.
        page.get_by_role("button", name="Connect wallet").click()
        page.get_by_role("button", name="Renew budget").click()
        page.get_by_label("New budget").select_option("10000000")
        page.get_by_role("button", name="Sign new budget permit").click()
        page.get_by_text("Budget renewed.").wait_for()
        # the unsettled 0.01 of the old budget still draws on the new allowance
        assert page.inner_text("#remaining") == "9.99 USDC of 10.00 USDC"

        # Unlink: the app must hand off again before it can use the budget.
        page.get_by_role("button", name="Unlink Game account Player One").click()
        page.get_by_text("No app accounts are bound to this wallet.").wait_for()
        with world.sessions() as session:
            statuses = session.scalars(select(AccountConnection.status)).all()
        assert statuses == [ConnectionStatus.UNLINKED]
        assert start_handoff(world, "player-7").json()["status"] == "needs_connection"

        # Revoke: Permit(value=0) signed here, recorded by the API host.
        page.get_by_role("button", name="Revoke budget").click()
        page.get_by_text("Budget revoked. Apps can no longer charge it.").wait_for()
        wait_for(page, lambda: page.inner_text("#budget-state").startswith("Revoked"))
        assert page.locator("#revoke").is_hidden()
        _shot(request, page, "account-revoked")
        assert [t["message"]["value"] for t in wallet.typed] == ["10000000", "0"]

        page.get_by_role("button", name="Forget verification").click()
        page.wait_for_load_state()
        page.get_by_role("button", name="Verify wallet").wait_for()
        assert page.locator("#connections").count() == 0
    assert_clean(chrome)


def test_renew_and_revoke_never_sign_a_permit_other_than_the_one_chosen(
        start_router: RouterFactory, sessions: sessionmaker[Session],
        chrome: BrowserSession) -> None:
    """The account page checks the permit it is handed against what it asked for before the
    wallet sees it: a revoke handed a permit of any value but 0 (it would be a new budget),
    or a renewal with another amount or expiry, is refused in words and nothing is signed."""
    wallet = new_wallet(11).install(chrome.context)
    refusal = ("The permit prepared for your wallet is not for the amount and expiry you "
               "chose. Nothing was signed; try again.")
    with portal_world(start_router, sessions) as portal:
        portal.world.authorize(wallet.account, 2_000_000)
        page = chrome.new_page()
        alter_permits(page, portal, value="5000000")
        page.goto(f"{portal.url}/account")
        page.get_by_role("button", name="Connect wallet").click()
        page.locator("#budget-state").wait_for()
        page.get_by_role("button", name="Revoke budget").click()
        page.get_by_role("alert").get_by_text(refusal).wait_for()
        assert page.get_by_role("button", name="Revoke budget").is_enabled()

        page.get_by_role("button", name="Renew budget").click()
        page.get_by_label("New budget").select_option("1000000")  # the page asks 1, gets 5
        page.get_by_role("button", name="Sign new budget permit").click()
        page.get_by_role("alert").get_by_text(refusal).wait_for()
        assert page.get_by_role("button", name="Sign new budget permit").is_enabled()
        assert page.get_by_label("New budget").is_enabled()
        assert wallet.typed == []
        budgets = portal.budgets(wallet.address)
        assert [(b.status, b.value_atomic) for b in budgets] == [
            (AuthorizationStatus.ACTIVE, 2_000_000)]
    assert_clean(chrome)
