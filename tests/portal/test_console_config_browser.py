"""The config revision pages in real Chromium: from the app page to the list to one
revision, rendered under the console's CSP with the recorded markup shown as text."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.portal.conftest import PASSWORD, Console
from tests.portal.test_console_config import HOSTILE, session_client, three_revisions
from tests.support.browser import BrowserSession, assert_clean, screenshot


def test_revisions_render_in_chromium(console: Console, developer: tuple[str, str],
                                      sessions: sessionmaker[Session], chrome: BrowserSession,
                                      request: pytest.FixtureRequest) -> None:
    with session_client(console, sessions, developer[0]) as client:
        _, second, _ = three_revisions(client)
    base = console.origin
    page = chrome.new_page()
    page.goto(f"{base}/login?next=/apps/arcade")
    page.get_by_label("Email or username").fill("dev1")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/apps/arcade")

    page.get_by_role("link", name="Config revisions").click()
    page.wait_for_url(f"{base}/apps/arcade/config")
    table = page.get_by_role("table")
    links = table.get_by_role("link").all_inner_texts()
    assert links == ["#3", "#1", "#2", "#1"]  # #3 links the #1 it rolled back to
    assert "5 created" in table.inner_text()
    sqlite = request.node.callspec.params.get("db_url") == "sqlite"
    if sqlite:
        screenshot(page, "console-config-revisions")

    page.get_by_role("link", name="#2", exact=True).click()
    page.wait_for_url(f"{base}/apps/arcade/config/{second['id']}")
    assert page.get_by_role("heading", level=1).inner_text() == "Config revision #2"
    retry = page.get_by_role("row").filter(has_text="retry")
    cells = [c.strip() for c in retry.get_by_role("cell").all_inner_texts()]
    assert cells == ["update", "product", "retry", "priceAtomic: 10000 → 20000"]
    # What the file said is text on the page, never markup: no <b>, no script ran.
    assert "name: Arcade → Arcade <b>Deluxe</b>" in page.get_by_role("table").inner_text()
    assert page.locator("main b").count() == 0
    config, state = page.locator("pre").all()  # as sent, and the state it left
    assert HOSTILE in config.inner_text() and HOSTILE not in state.inner_text()
    assert page.get_by_role("heading", name="State it left").is_visible()
    runtime = page.get_by_role("listitem").filter(has_text="runtime")
    assert not runtime.is_visible()  # unchanged resources are folded away
    page.locator("summary", has_text="1 unchanged").click()
    assert runtime.is_visible()
    if sqlite:
        screenshot(page, "console-config-revision")
    assert_clean(chrome)
