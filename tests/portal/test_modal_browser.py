"""The runtime modal (``/sdk/svc-modal.js``) in real Chromium, on a real runtime host.

The demo origin (``examples/demo_origin.py``) serves ``/wallet`` behind the real router on
``game.apps.localhost``; the page loads our script from the portal, opens the authorize
page in an in-page iframe modal, receives the summary from ``/svc-auth-return`` by
``postMessage`` and pays through the product route. The wallet card and pill must follow
spec 3.8 in every state.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Frame, FrameLocator, Page
from sqlalchemy.orm import Session, sessionmaker

from payments.ledger.models import AuthorizationStatus
from tests.portal.wallet_world import (
    assert_clean,
    new_wallet,
    only_ours,
    portal_world,
    record_hosts,
    revoke_on_account_page,
    wait_for,
)
from tests.support.browser import BrowserSession, screenshot
from tests.support.router import RouterFactory

MODAL = "iframe[title='Authorize payments']"
STORAGE_KEY = "svc:auth-summary:game"

# Spec 3.8, written out here independently of the script: card status, primary button,
# pill text (None: the budget in USDC), colour family.
SPEC_STATES: dict[str, tuple[str, str, str | None, str]] = {
    "checking": ("Checking payment", "Checking", "Checking", "muted-gray"),
    "game_login_needed": ("Game login needed", "Log in", "Log in", "neutral-gray"),
    "needs_connection": ("Payment off", "Enable payment", "Enable payment", "teal"),
    "opening_portal": ("Opening Portal", "Opening", "Opening", "teal"),
    "ready": ("Payment ready", "Manage", None, "green-teal"),
    "needs_budget": ("Budget low", "Renew budget", "Renew budget", "amber"),
    "budget_expired": ("Budget expired", "Renew budget", "Renew budget", "amber"),
    "budget_revoked": ("Budget revoked", "Renew budget", "Renew budget", "amber"),
    "sync_failed": ("Sync failed", "Try again", "Try again", "red"),
    "unavailable": ("Unavailable", "Try again", "Unavailable", "muted-red"),
}
FORBIDDEN = re.compile(r"connect|link|disconnected|not connected", re.IGNORECASE)
SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def _shot(request: pytest.FixtureRequest, target: Any, name: str) -> None:
    if request.node.callspec.params.get("db_url") == "sqlite":
        screenshot(target, f"portal-{name}")


def card_state(page: Page) -> dict[str, str]:
    """What the card and pill show right now (Playwright pierces the open shadow root)."""
    result: dict[str, str] = page.evaluate("""() => {
      const root = document.getElementById("wallet").shadowRoot;
      const pill = root.querySelector(".pill");
      return {state: pill.dataset.state, color: pill.dataset.color,
              pill: root.querySelector(".pill-text").textContent,
              status: root.querySelector(".status").textContent,
              primary: root.querySelector(".actions .primary").textContent,
              remaining: root.querySelector(".remaining").textContent};
    }""")
    return result


def wait_state(page: Page, state: str) -> dict[str, str]:
    wait_for(page, lambda: card_state(page)["state"] == state)
    return card_state(page)


def authorize_in_modal(page: Page, budget: str, *, renew: bool = False,
                       before_signing: Callable[[], None] | None = None) -> Frame:
    """Sign a new permit inside the modal's iframe; returns that frame."""
    frame = wait_modal_frame(page)
    assert frame.url.startswith("http://portal.localhost:")
    assert "mode=popup" in frame.url and "embed=1" in frame.url
    assert ("renew=1" in frame.url) is renew
    modal: FrameLocator = page.frame_locator(MODAL)
    modal.get_by_role("button", name="Connect wallet").click()
    modal.get_by_label("Budget", exact=True).select_option(budget)
    if before_signing is not None:
        before_signing()
    modal.get_by_role("button", name="Sign budget permit").click()
    return frame


def wait_modal_frame(page: Page) -> Frame:
    """The frame of the modal's iframe element as it is now (``page.frames`` may still list
    an earlier modal's frame whose detach Playwright has not heard of yet)."""
    def current() -> Frame | None:
        handle = page.query_selector(MODAL)
        frame = handle.content_frame() if handle is not None else None
        return frame if frame is not None and "/authorize?" in frame.url else None
    wait_for(page, lambda: current() is not None)
    found = current()
    assert found is not None
    return found


def pay(page: Page, product: str) -> str:
    page.locator(f"button[data-product={product}]").click()
    outcome = page.locator("#outcome")
    wait_for(page, lambda: outcome.inner_text().startswith(("Paid", "Not paid")))
    return outcome.inner_text()


def test_modal_authorize_pay_renew_revoke(
        start_router: RouterFactory, sessions: sessionmaker[Session], chrome: BrowserSession,
        request: pytest.FixtureRequest) -> None:
    wallet = new_wallet(2).install(chrome.context)
    hosts = record_hosts(chrome)
    with portal_world(start_router, sessions, demo=True) as portal:
        page = chrome.new_page()
        page.goto(f"{portal.runtime}/wallet")
        assert wait_state(page, "game_login_needed")["pill"] == "Log in"
        page.get_by_role("button", name="Log in as Player One").click()
        assert wait_state(page, "needs_connection")["status"] == "Payment off"
        _shot(request, page, "modal-payment-off")

        page.locator("#wallet .actions .primary").click()  # Enable payment
        assert wait_state(page, "opening_portal")["pill"] == "Opening"
        authorize_in_modal(page, "1000000",
                           before_signing=lambda: _shot(request, page, "modal-open"))
        ready = wait_state(page, "ready")
        assert page.locator(MODAL).count() == 0  # the modal closed itself
        assert ready["pill"] == "1.00 USDC" and ready["remaining"] == "1.00 USDC"
        # The DOM is the truth here: Playwright's own detach event for the (cross-origin,
        # out-of-process) frame could arrive seconds late on a loaded machine.
        assert page.evaluate("document.querySelectorAll('iframe').length") == 0
        code = page.evaluate(f"sessionStorage.getItem({STORAGE_KEY!r})")
        assert code and code.startswith("sum_")
        # the token balance is read from the chain (no relay ran: none yet), never the budget
        wait_for(page, lambda: page.locator("#wallet .balance").inner_text() == "0.00 USDC")
        _shot(request, page.locator("#wallet"), "modal-ready")

        outcome = pay(page, "retry")
        delivery = re.search(r"delivery (ztdlv_[0-9a-f]+)", outcome)
        assert delivery, outcome
        with portal.world.keyed() as backend:
            found = backend.get(f"/api/deliveries/{delivery.group(1)}").json()["delivery"]
        assert found["walletAddress"] == wallet.address
        assert found["developerUserId"] == "player-one"
        assert card_state(page)["remaining"] == "0.99 USDC"

        # Renew: a fresh permit even though the budget is active (renew=1 skips the shortcut)
        page.locator("#wallet .actions button", has_text="Renew budget").click()
        authorize_in_modal(page, "5000000", renew=True)
        wait_for(page, lambda: card_state(page)["remaining"] == "4.99 USDC")
        budgets = portal.budgets(wallet.address)
        assert [b.status for b in budgets] == [AuthorizationStatus.SUPERSEDED,
                                               AuthorizationStatus.ACTIVE]
        assert budgets[1].value_atomic == 5_000_000

        # Revoke on the account page (another tab), then a payment fails and says why
        revoke_on_account_page(chrome, portal)
        outcome = pay(page, "retry")
        assert outcome.startswith("Not paid"), outcome
        revoked = wait_state(page, "budget_revoked")
        assert (revoked["status"], revoked["primary"], revoked["pill"], revoked["color"]) == (
            "Budget revoked", "Renew budget", "Renew budget", "amber")
        _shot(request, page.locator("#wallet"), "modal-budget-revoked")
    assert len(wallet.typed) == 3  # two budgets and the revoke: nothing else was signed
    assert [t["message"]["value"] for t in wallet.typed] == ["1000000", "5000000", "0"]
    assert_clean(chrome)
    assert only_ours(hosts), hosts  # no third-party CDN, every file served by us


@SQLITE_ONLY
def test_modal_origin_checks_and_cancel(
        start_router: RouterFactory, sessions: sessionmaker[Session],
        chrome: BrowserSession) -> None:
    new_wallet(3).install(chrome.context)
    with portal_world(start_router, sessions, demo=True) as portal:
        page = chrome.new_page()
        page.goto(f"{portal.runtime}/wallet")
        page.get_by_role("button", name="Log in as Player One").click()
        wait_state(page, "needs_connection")
        page.locator("#wallet .pill").click()  # the pill acts like the primary button
        wait_state(page, "opening_portal")
        frame = wait_modal_frame(page)
        frame.wait_for_load_state()
        # A look-alike message from anything but our iframe is ignored, even same-origin.
        page.evaluate("""() => window.postMessage({type: "svc:auth-return", app: "game",
                                                  code: "sum_forged_by_the_page"}, "*")""")
        page.wait_for_timeout(200)
        assert card_state(page)["state"] == "opening_portal"
        assert page.evaluate(f"sessionStorage.getItem({STORAGE_KEY!r})") is None
        # Cancel in the portal frame: it posts to exactly the runtime origin; the modal closes.
        page.frame_locator(MODAL).get_by_role("button", name="Cancel").click()
        assert wait_state(page, "needs_connection")["pill"] == "Enable payment"
        assert page.locator(MODAL).count() == 0
        # Escape closes the modal too (keyboard)
        page.locator("#wallet .pill").focus()
        page.keyboard.press("Enter")
        wait_state(page, "opening_portal")
        in_modal = "document.activeElement.hasAttribute('data-svc-modal')"
        assert page.evaluate(in_modal)  # focus moved into the dialog
        page.keyboard.press("Shift+Tab")  # ... and stays there
        assert page.evaluate(in_modal)
        page.keyboard.press("Escape")
        wait_state(page, "needs_connection")
    assert_clean(chrome)


@SQLITE_ONLY
def test_every_wallet_state_text_button_and_colour(
        start_router: RouterFactory, sessions: sessionmaker[Session], chrome: BrowserSession,
        request: pytest.FixtureRequest) -> None:
    with portal_world(start_router, sessions, demo=True) as portal:
        page = chrome.new_page()
        page.goto(f"{portal.runtime}/wallet")
        wait_state(page, "game_login_needed")
        shown = page.evaluate("""(states) => {
          const grid = document.createElement("div");
          grid.id = "states";
          grid.style.cssText = "display:grid;grid-template-columns:repeat(2,24rem);gap:1rem";
          document.body.replaceChildren(grid);
          return states.map((state) => {
            const host = document.createElement("div");
            grid.appendChild(host);
            SvcWallet.preview(host, state, state === "game_login_needed" ? {} : {
              wallet: "0x340ab352f094815d48d0e599d83279cf960a90ce", remaining: "1230000",
              balance: "100000000"});
            const root = host.shadowRoot, pill = root.querySelector(".pill");
            const buttons = [...root.querySelectorAll("button")];
            return {state, status: root.querySelector(".status").textContent,
                    primary: root.querySelector(".actions .primary").textContent,
                    pill: root.querySelector(".pill-text").textContent,
                    color: pill.dataset.color,
                    background: getComputedStyle(pill).backgroundColor,
                    text: root.textContent,
                    labels: buttons.map((b) => b.getAttribute("aria-label") || "").join(" ")};
          });
        }""", list(SPEC_STATES))
        screenshot(page.locator("#states"), "portal-wallet-states")
    for row in shown:
        status, primary, pill, family = SPEC_STATES[row["state"]]
        assert (row["status"], row["primary"], row["color"]) == (status, primary, family), row
        assert row["pill"] == (pill or "1.23 USDC"), row
        # colour always comes with text, and the colour is what the family says
        assert row["pill"].strip() and row["status"].strip()
        assert colour_family(row["background"]) == family_kind(family), row
        # spec 3.8: never Connect / Link / Disconnected / Not connected as the payment state
        assert not FORBIDDEN.search(row["text"]), row
        assert not FORBIDDEN.search(row["labels"]), row
    assert_clean(chrome)


def family_kind(family: str) -> str:
    return {"muted-gray": "gray", "neutral-gray": "gray", "teal": "teal", "green-teal": "teal",
            "amber": "amber", "red": "red", "muted-red": "red"}[family]


def colour_family(css: str) -> str:
    """Classify an ``rgb(r, g, b)`` background by hue: gray, teal, amber or red."""
    r, g, b = (int(v) for v in re.findall(r"\d+", css)[:3])
    if max(r, g, b) - min(r, g, b) < 20:
        return "gray"
    if g > r and b > r:
        return "teal"
    if r > g > b and g - b > 25:
        return "amber"
    if r > g and r > b:
        return "red"
    return "other"
