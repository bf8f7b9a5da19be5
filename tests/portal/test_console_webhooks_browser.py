"""The console's webhook page in real Chromium: create the endpoint, copy the secret shown
once, send a test webhook to a receiver on loopback that verifies it with that secret,
then retry an event that failed; back and reload never show the secret again."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page
from sqlalchemy.orm import Session, sessionmaker

from svc.webhooks import verify_webhook
from tests.factories import add_owned_app
from tests.portal.conftest import PASSWORD, Console, ConsoleFactory
from tests.support.browser import BrowserSession, assert_clean, screenshot, wait_for
from tests.webhooks.kit import FAIL, FAST, OK, FaultyReceiver, attempts, receiver


@pytest.fixture
def hooked(start_console: ConsoleFactory) -> Iterator[Console]:
    """The console with the webhook dispatcher running, on a fast retry schedule."""
    with start_console(**FAST) as running:
        yield running


@pytest.fixture
def hook() -> Iterator[FaultyReceiver]:
    with receiver() as faulty:
        yield faulty


def _log_in(page: Page, base: str) -> None:
    page.goto(f"{base}/login")
    page.get_by_label("Email or username").fill("dev1")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/apps")


def test_webhook_created_tested_and_retried_in_chromium(
        hooked: Console, developer: tuple[str, str], sessions: sessionmaker[Session],
        chrome: BrowserSession, hook: FaultyReceiver, request: pytest.FixtureRequest,
        caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]) -> None:
    caplog.set_level(logging.DEBUG)
    add_owned_app(sessions, developer[1], "arcade")
    base = hooked.origin
    page = chrome.new_page()
    _log_in(page, base)
    page.goto(f"{base}/apps/arcade")
    page.get_by_role("link", name="Webhooks: endpoint, signing secret").click()
    page.wait_for_url(f"{base}/apps/arcade/webhooks")

    page.get_by_label("Receiver URL").fill(hook.url)
    assert page.get_by_label("payment.delivered").is_checked()
    page.get_by_label("payment.settled").check()
    with page.expect_response(lambda r: r.request.method == "POST") as created:
        page.get_by_role("button", name="Create endpoint").click()
    assert created.value.headers["cache-control"] == "no-store"
    secret = page.locator("#secret").inner_text()
    assert secret.startswith("zwhsec_") and len(secret) == 7 + 64
    hook.secret = secret
    chrome.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    page.get_by_role("button", name="Copy secret").click()
    page.get_by_text("Copied to the clipboard.").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == secret

    # Back: the webhook page as it is now (no-store, so fetched again), no secret.
    page.go_back()
    page.wait_for_url(f"{base}/apps/arcade/webhooks")
    page.get_by_role("heading", name="Endpoint", exact=True).wait_for()
    assert secret not in page.content()
    assert f"zwhsec_…{secret[-4:]}" in page.content()
    # Forward: the secret page was a no-store answer to a POST; Chromium neither shows it
    # from a cache nor sends the form again unasked (its error page asks first).
    with pytest.raises(PlaywrightError, match="ERR_CACHE_MISS"):
        page.go_forward()
    page.close()  # it is on its way to Chromium's own error page
    page = chrome.new_page()
    page.goto(f"{base}/apps/arcade/webhooks")
    assert secret not in page.content()

    page.get_by_role("button", name="Send test webhook").click()
    page.wait_for_url("**/webhooks?done=test-queued*")
    wait_for(page, lambda: len(hook.delivered_ids()) == 1)
    sent = hook.requests[0]
    event = verify_webhook(sent.body, sent.headers["x-svc-timestamp"],
                           sent.headers["x-svc-signature"], secret)
    assert event.test is True and event.type == "payment.delivered"
    page.reload()
    row = page.get_by_role("row").filter(has_text=event.id)
    assert "delivered" in row.inner_text() and "200" in row.inner_text()
    assert row.get_by_role("button").count() == 0  # delivered: nothing to retry

    # A test the receiver refuses until the schedule is used up, then retried by hand.
    hook.plan = lambda n, event_id: FAIL
    page.get_by_role("button", name="Send test webhook").click()
    page.wait_for_url("**/webhooks?done=test-queued*")
    wait_for(page, lambda: any(a.status.value == "failed"
                               for a in attempts(sessions).values()))
    (failed,) = [a for a in attempts(sessions).values() if a.status.value == "failed"]
    page.reload()
    failed_row = page.get_by_role("row").filter(has_text=failed.event_id)
    assert "failed" in failed_row.inner_text() and "503" in failed_row.inner_text()
    if request.node.callspec.params.get("db_url") == "sqlite":
        screenshot(page, "console-webhooks")
    hook.plan = lambda n, event_id: OK
    page.get_by_role("button", name=f"Retry event {failed.event_id}").click()
    page.wait_for_url("**/webhooks?done=retried*")
    assert "Retry queued" in page.get_by_role("status").first.inner_text()
    wait_for(page, lambda: attempts(sessions)[failed.event_id].status.value == "delivered")
    assert hook.requests[-1].event_id == failed.event_id and hook.requests[-1].status == 200
    page.reload()
    assert "delivered" in page.get_by_role("row").filter(has_text=failed.event_id).inner_text()
    assert secret not in page.content()

    out, err = capfd.readouterr()
    assert secret not in caplog.text + out + err
    assert_clean(chrome)
