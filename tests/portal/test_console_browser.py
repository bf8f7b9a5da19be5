"""Sign-up to first API key in real Chromium, and a CLI sign-in approved in the console."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, Response

from payments.slugs import slugify
from tests.portal.conftest import CODE_RE, Console
from tests.support.browser import BrowserSession, screenshot

PAY_TO = "0x" + "ab12" * 10


@pytest.fixture
def server_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every log record of the process, uvicorn's too (its loggers do not propagate)."""
    caplog.set_level(logging.DEBUG)
    uvicorn = logging.getLogger("uvicorn")
    uvicorn.addHandler(caplog.handler)
    try:
        yield caplog
    finally:
        uvicorn.removeHandler(caplog.handler)


def _shot(request: pytest.FixtureRequest, page: Page, name: str) -> None:
    if request.node.callspec.params.get("db_url") == "sqlite":
        screenshot(page, f"console-{name}")


def test_sign_up_to_first_api_key(console: Console, chrome: BrowserSession,
                                  request: pytest.FixtureRequest,
                                  server_logs: pytest.LogCaptureFixture,
                                  capfd: pytest.CaptureFixture[str]) -> None:
    base = console.settings.console_url
    page = chrome.new_page()
    page.goto(f"{base}/signup")
    _shot(request, page, "signup")
    focused = []
    for _ in range(8):  # skip link, header links, then the form in reading order
        page.keyboard.press("Tab")
        focused.append(page.evaluate("document.activeElement.id || "
                                     "document.activeElement.textContent"))
    assert focused == ["Skip to content", "svc developer console", "Log in", "Sign up",
                       "email", "username", "password", "Create account"]
    page.get_by_label("Email").fill("ada@example.com")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill("a long passphrase 1")
    page.get_by_role("button", name="Create account").click()
    page.wait_for_url("**/verify?email=*")
    assert "We sent a 6-digit code to ada@example.com" in page.get_by_role("status").inner_text()

    mail = console.smtp.wait_for_message("ada@example.com")
    found = CODE_RE.search(mail.get_content())
    assert found, mail.get_content()
    _shot(request, page, "verify")
    page.get_by_label("Verification code").fill(found.group(1))
    page.get_by_role("button", name="Verify and sign in").click()
    page.wait_for_url(f"{base}/apps")

    page.get_by_role("link", name="Create an app").click()
    page.get_by_label("Name").fill("Space <Blaster>")
    # a blank slug is made from the name: the field shows which one while the name is typed
    assert page.get_by_label("Slug").get_attribute("placeholder") == "space-blaster"
    page.get_by_label("Headline").fill("Shoot & collect")
    page.get_by_role("button", name="Create app").click()
    page.wait_for_url("**/apps/space-blaster?done=created")
    assert "App created" in page.get_by_role("status").inner_text()
    assert "Space &lt;Blaster&gt;" in page.content()  # user input is escaped

    page.get_by_role("button", name="Zent · 0.01 USDC").click()
    page.wait_for_url("**done=product-added*")
    assert page.locator("#products td", has_text="0.01 USDC").count() == 1
    page.get_by_label("Base USDC address").fill(PAY_TO)
    page.get_by_role("button", name="Save pay_to").click()
    page.wait_for_url("**done=pay-to-review*")
    assert "Review started" in page.get_by_role("status").inner_text()

    page.get_by_label("Label").fill("backend")
    page.get_by_label("charges:create").check()
    assert page.get_by_label("orders:create").is_checked()
    assert not page.get_by_label("connections:read").is_checked()
    with page.expect_response(lambda r: r.request.method == "POST") as created:
        page.get_by_role("button", name="Create API key").click()
    assert created.value.headers["cache-control"] == "no-store"
    secret = page.locator("#secret").inner_text()
    assert secret.startswith("zpk_test_") and len(secret) > 40
    preview = f"zpk_test_…{secret[-4:]}"
    chrome.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    page.get_by_role("button", name="Copy key").click()
    page.get_by_text("Copied to the clipboard.").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == secret
    # The screenshot is committed: no key-shaped secret may reach the repository.
    page.evaluate("document.getElementById('secret').textContent = "
                  "'zpk_test_' + '\u2022'.repeat(48)")
    _shot(request, page, "key-created")
    # A reload sends the form again (a person is asked first): answered with the key the
    # form made, by its preview only, and no second key.
    with page.expect_response(lambda r: r.request.method == "POST") as again:
        page.reload()
    assert again.value.status == 409 and again.value.headers["cache-control"] == "no-store"
    assert page.get_by_role("heading", level=1).inner_text() == "This key was already created"
    assert secret not in page.content() and preview in page.content()
    page.get_by_role("link", name="Back to the keys of Space <Blaster>").click()
    page.wait_for_url(f"{base}/apps/space-blaster#keys")
    assert page.locator("#keys tbody tr").count() == 1

    later: list[str] = []

    def keep(response: Response) -> None:
        if response.status < 300:
            later.append(response.text())
    chrome.context.on("response", keep)
    page.goto(f"{base}/apps/space-blaster")
    html = page.content()
    assert secret not in html and preview in html
    assert "charges:create" in page.locator("#keys tbody").inner_text()
    _shot(request, page, "app")
    page.goto(f"{base}/apps")
    _shot(request, page, "apps")
    with console.client() as client:
        jar = "; ".join(f"{c['name']}={c['value']}" for c in chrome.context.cookies(base))
        keys = client.get("/api/developer/apps/space-blaster/keys", headers={"cookie": jar})
        assert keys.status_code == 200 and preview in keys.text
        later.append(keys.text)
    assert later and all(secret not in body for body in later)
    out, err = capfd.readouterr()
    assert secret not in server_logs.text + out + err
    assert chrome.log.csp_violations() == [] and chrome.log.errors == []


def test_cli_sign_in_is_approved_in_the_console(console: Console, chrome: BrowserSession,
                                                request: pytest.FixtureRequest) -> None:
    base = console.settings.console_url
    page = chrome.new_page()
    page.goto(f"{base}/signup")
    page.get_by_label("Email").fill("cli@example.com")
    page.get_by_label("Username").fill("cli-user")
    page.get_by_label("Password").fill("a long passphrase 2")
    page.get_by_role("button", name="Create account").click()
    page.wait_for_url("**/verify?email=*")
    found = CODE_RE.search(console.smtp.wait_for_message("cli@example.com").get_content())
    assert found
    page.get_by_label("Verification code").fill(found.group(1))
    page.get_by_role("button", name="Verify and sign in").click()
    page.wait_for_url(f"{base}/apps")
    page.goto(f"{base}/apps/new")
    page.get_by_label("Name").fill("Головоломка")  # no Latin letter to make a slug of
    assert page.get_by_label("Slug").get_attribute("placeholder") == ""
    page.get_by_role("button", name="Create app").click()
    assert page.get_by_role("alert").inner_text().startswith(
        "Could not make an address from the name 'Головоломка'; choose a slug")
    for name, slug in (("Café Crème 2!", "cafe-creme-2"), ("--Über--Game--", "uber-game"),
                       ("a" * 62 + " b", "a" * 62)):
        page.get_by_label("Name").fill(name)
        assert page.get_by_label("Slug").get_attribute("placeholder") == slugify(name) == slug
    page.get_by_label("Name").fill("Головоломка")
    page.get_by_label("Slug").fill("puzzle")
    page.get_by_role("button", name="Create app").click()
    page.wait_for_url("**/apps/puzzle?done=created")
    assert page.get_by_role("heading", name="Головоломка").count() == 1

    with console.client("api") as api:
        started = api.post("/api/developer/cli/auth-requests", json={
            "scopes": ["apps:read", "products:write"], "ttlSeconds": 7200}).json()
        page.goto(started["verificationUriComplete"])
        assert "2 hours" in page.content() and "products:write" in page.content()
        _shot(request, page, "cli-approve")
        page.get_by_label("choose one").select_option("puzzle")
        page.get_by_role("button", name="Approve").click()
        page.get_by_role("heading", name="CLI sign-in approved").wait_for()
        issued = api.post("/api/developer/cli/token", json={"deviceCode": started["deviceCode"]})
        assert issued.status_code == 200, issued.text
        assert issued.json()["grant"]["app"] == "puzzle"

        again = api.post("/api/developer/cli/auth-requests", json={"app": "puzzle"}).json()
        page.goto(f"{base}/device")
        page.get_by_label("Code").fill(again["userCode"].replace("-", "").lower())
        page.get_by_role("button", name="Continue").click()
        page.get_by_role("button", name="Deny").click()
        page.get_by_role("heading", name="CLI sign-in denied").wait_for()
        denied = api.post("/api/developer/cli/token", json={"deviceCode": again["deviceCode"]})
        assert denied.status_code == 403 and denied.json()["code"] == "access_denied"

        # A slug that is not one of the organization's apps: said plainly, Deny only.
        typo = api.post("/api/developer/cli/auth-requests", json={"app": "puzzel"}).json()
        page.goto(typo["verificationUriComplete"])
        assert page.get_by_role("alert").inner_text() == (
            "There is no app puzzel in your organization, so this sign-in cannot be approved. "
            "Deny it to stop the command waiting, then run it again with --app set to one of "
            "your apps: puzzle.")
        assert page.get_by_role("button", name="Approve").count() == 0
        page.get_by_role("button", name="Deny").click()
        page.get_by_role("heading", name="CLI sign-in denied").wait_for()
        ended = api.post("/api/developer/cli/token", json={"deviceCode": typo["deviceCode"]})
        assert ended.status_code == 403 and ended.json()["code"] == "access_denied"
    assert chrome.log.csp_violations() == [] and chrome.log.errors == []
