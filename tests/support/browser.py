"""Real Chromium (Debian's ``/usr/bin/chromium``) driven by Playwright's sync API.

Browsers cannot be downloaded here, so Playwright launches the system Chromium; never
run ``playwright install``. ``*.localhost`` names resolve to loopback inside Chromium,
so ``http://<slug>.apps.localhost:<port>/`` reaches a router started by the tests.

Use the sync API from the test thread only (servers run in their own threads). A test
module wires the helpers into fixtures, for example::

    @pytest.fixture(scope="module")
    def browser() -> Iterator[Browser]:
        with chromium() as launched:
            yield launched

    @pytest.fixture
    def chrome(browser: Browser) -> Iterator[BrowserSession]:
        with browser_session(browser) as opened:
            yield opened
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Locator,
    Page,
    sync_playwright,
)
from playwright.sync_api import Error as PlaywrightError

CHROMIUM_PATH = "/usr/bin/chromium"
CHROMIUM_ARGS = (
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
)
# Playwright's own wait limit (ms): everything here is loopback, so fail fast.
DEFAULT_TIMEOUT_MS = 10_000

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"

_CSP_MESSAGE = re.compile(r"Content[- ]Security[- ]Policy", re.IGNORECASE)


@contextmanager
def chromium(*extra_args: str, **launch: Any) -> Iterator[Browser]:
    """Playwright + headless system Chromium; both are shut down on exit. ``extra_args``
    are Chromium switches added to ours (e.g. ``--host-resolver-rules``)."""
    if not os.access(CHROMIUM_PATH, os.X_OK):
        pytest.fail(f"{CHROMIUM_PATH} is missing: browser tests need Debian's chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM_PATH, args=[*CHROMIUM_ARGS, *extra_args], headless=True,
            **launch)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class ConsoleLog:
    """Console messages and uncaught errors of every page and frame of a context."""

    messages: list[tuple[str, str, str]] = field(default_factory=list)  # (type, text, url)
    errors: list[str] = field(default_factory=list)

    def record(self, message: ConsoleMessage) -> None:
        self.messages.append((message.type, message.text, message.location.get("url", "")))

    def csp_violations(self) -> list[str]:
        """Console reports of Content-Security-Policy violations (Chromium logs them)."""
        return [text for _, text, _ in self.messages if _CSP_MESSAGE.search(text)]

    def texts(self) -> list[str]:
        return [text for _, text, _ in self.messages]


@dataclass
class BrowserSession:
    """A fresh browser context (own cookies and storage) and everything it logged."""

    context: BrowserContext
    log: ConsoleLog

    def new_page(self) -> Page:
        return self.context.new_page()


@contextmanager
def browser_session(browser: Browser, **options: Any) -> Iterator[BrowserSession]:
    """``browser.new_context(**options)`` with console capture; closed on exit."""
    context = browser.new_context(**options)
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)
    log = ConsoleLog()
    context.on("console", log.record)
    context.on("weberror", lambda error: log.errors.append(str(error.error)))
    try:
        yield BrowserSession(context, log)
    finally:
        with suppress(PlaywrightError):  # the browser already went away: nothing to close
            context.close()


def screenshot(target: Page | Locator, name: str) -> Path:
    """Save ``docs/screenshots/<name>.png`` (a page: its full height; a locator: the element)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    if isinstance(target, Page):
        target.screenshot(path=str(path), full_page=True)
    else:
        target.screenshot(path=str(path))
    return path


def wait_for(page: Page, condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Poll a Python-side condition, letting Playwright deliver events meanwhile. The limit
    is generous (an audit saw 10 s run out at load average 10); a met condition returns at
    once."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        page.wait_for_timeout(25)


def assert_clean(chrome: BrowserSession) -> None:
    """Every page ran under its CSP: nothing refused, nothing thrown."""
    assert chrome.log.csp_violations() == []
    assert chrome.log.errors == []
