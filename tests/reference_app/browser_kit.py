"""What the reference app's browser tests share: the page's controls, the modal, the dev
wallet inside it, the pending purchase in localStorage."""

from __future__ import annotations

import json
from typing import Any

import httpx
from playwright.sync_api import Frame, Page

from tests.portal.wallet_world import wait_for
from tests.reference_app.world import RefWorld

MODAL = "iframe[title='Authorize payments']"
PENDING_KEY = "refapp:pending:game"


def open_app(page: Page, world: RefWorld, name: str | None = "Player One") -> None:
    page.goto(f"{world.runtime}/")
    wait_for(page, lambda: page.evaluate("document.body.dataset.ready") == "1")
    if name is not None:
        page.get_by_label("Player name").fill(name)
        page.get_by_role("button", name="Log in").click()
        page.locator("#player-panel").wait_for()


def card_state(page: Page) -> str:
    state: str = page.evaluate(
        "document.getElementById('wallet').shadowRoot.querySelector('.pill').dataset.state")
    return state


def modal_frame(page: Page) -> Frame:
    def current() -> Frame | None:
        handle = page.query_selector(MODAL)
        frame = handle.content_frame() if handle is not None else None
        return frame if frame is not None and "/authorize?" in frame.url else None
    wait_for(page, lambda: current() is not None)
    found = current()
    assert found is not None
    return found


def sign_with_dev_wallet(page: Page, *, first: bool = True) -> None:
    """Authorize in the modal with the portal's dev wallet (dev mode, test funds)."""
    modal_frame(page).wait_for_load_state()
    modal = page.frame_locator(MODAL)
    modal.get_by_role("button", name="Connect wallet").click()
    if first:  # no extension in this browser: the portal offers its dev wallet
        modal.get_by_role("button", name="Use dev wallet (test funds, dev mode only)").click()
    modal.get_by_role("button", name="Sign budget permit").click()


def buy(page: Page, product: str) -> None:
    page.locator(f"button.buy[data-product='{product}']").click()


def outcome(page: Page, *expected: str, timeout: float = 30.0) -> str:
    """Wait until the page's outcome is one of ``expected``; its text."""
    wait_for(page, lambda: page.evaluate("document.body.dataset.outcome") in expected,
             timeout=timeout)
    text: str = page.locator("#outcome").inner_text()
    return text


def pending(page: Page) -> dict[str, Any] | None:
    raw = page.evaluate(f"localStorage.getItem({PENDING_KEY!r})")
    return json.loads(raw) if raw else None


def inventory(page: Page) -> dict[str, int]:
    rows: list[list[str]] = page.evaluate("""() => [...document.querySelectorAll(
        '#inventory li')].map((li) => [li.dataset.product, li.dataset.count])""")
    return {product: int(count) for product, count in rows}


def usdc_balance(world: RefWorld, address: str) -> int:
    with httpx.Client(base_url=world.router.url, timeout=10, headers={
            "host": f"portal.localhost:{world.router.port}"}) as portal:
        answer = portal.get("/api/public/usdc-balance", params={"address": address})
    assert answer.status_code == 200, answer.text
    return int(answer.json()["balanceAtomic"] or 0)
