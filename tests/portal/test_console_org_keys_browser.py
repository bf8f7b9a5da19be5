"""The organization keys page in real Chromium: from the header to a new key shown once,
then its preview in the list, then revoked."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.factories import add_owned_app
from tests.portal.conftest import PASSWORD, Console
from tests.support.browser import BrowserSession, assert_clean, screenshot


def test_organization_key_in_chromium(console: Console, developer: tuple[str, str],
                                      sessions: sessionmaker[Session], chrome: BrowserSession,
                                      request: pytest.FixtureRequest) -> None:
    add_owned_app(sessions, developer[1], "arcade")
    base = console.origin
    page = chrome.new_page()
    page.goto(f"{base}/login")
    page.get_by_label("Email or username").fill("dev1")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/apps")

    page.get_by_role("link", name="Organization keys").click()
    page.wait_for_url(f"{base}/keys")
    page.get_by_label("Label").fill("all games")
    page.get_by_label("charges:create").check()
    with page.expect_response(lambda r: r.request.method == "POST") as created:
        page.get_by_role("button", name="Create API key").click()
    assert created.value.headers["cache-control"] == "no-store"
    secret = page.locator("#secret").inner_text()
    assert secret.startswith("zpk_test_") and len(secret) > 40
    assert "Organization" in page.locator("dl").inner_text()

    page.get_by_role("link", name="I have stored it").click()
    page.wait_for_url(f"{base}/keys#keys")
    assert secret not in page.content()
    row = page.get_by_role("row").filter(has_text="all games")
    assert f"zpk_test_…{secret[-4:]}" in row.inner_text() and "active" in row.inner_text()
    if request.node.callspec.params.get("db_url") == "sqlite":
        screenshot(page, "console-org-keys")

    page.get_by_role("button", name="Revoke key all games").click()
    page.wait_for_url("**/keys?done=key-revoked*")
    assert "Organization key revoked" in page.get_by_role("status").inner_text()
    assert "revoked" in row.inner_text()
    assert page.get_by_role("button", name="Revoke key all games").count() == 0
    assert_clean(chrome)
