"""A real router (uvicorn on loopback) sending mail to a real SMTP server, for the console.

``start_console(limits=..., clock=...)`` swaps the console host's ``DeveloperServices`` for
one with small limits and a fake clock: ``create_app`` has no hook for them yet.
``start_console(secure_cookies=True)`` writes the service URLs with https (Secure,
``__Host-`` cookies). Other keyword arguments are settings (e.g. the webhook dispatcher's).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser
from sqlalchemy.orm import Session, sessionmaker

from payments.db import utcnow
from payments.developer.services import Limits
from payments.ratelimit import InMemoryRateLimiter
from router.app import create_app
from router.settings import Settings
from tests.factories import add_developer
from tests.support.browser import BrowserSession, browser_session, chromium
from tests.support.router import router_settings
from tests.support.servers import serve_router
from tests.support.smtp import SmtpServer, smtp_server

PASSWORD = "correct horse battery"
CSRF_RE = re.compile(r'name="csrf" value="([^"]+)"')
FORM_TOKEN_RE = re.compile(r'name="formToken" autocomplete="off" value="([^"]+)"')
CODE_RE = re.compile(r"\b(\d{6})\b")


class FakeClock:
    """Real time plus an offset the test moves forward; drives the services and the limiter."""

    def __init__(self) -> None:
        self._offset = 0.0
        self._lock = threading.Lock()

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += seconds

    def now(self) -> datetime:
        return utcnow() + timedelta(seconds=self._offset)

    def monotonic(self) -> float:
        return time.monotonic() + self._offset


@dataclass
class Console:
    url: str  # http://127.0.0.1:PORT
    port: int
    settings: Settings
    smtp: SmtpServer

    @property
    def origin(self) -> str:
        return self.settings.console_url

    def host(self, kind: str) -> str:
        return f"{kind}.localhost:{self.port}"

    def client(self, kind: str = "console", **kwargs: Any) -> httpx.Client:
        """An httpx client addressing ``<kind>.localhost`` (console, api, portal, ...)."""
        return httpx.Client(base_url=self.url, headers={"host": self.host(kind)},
                            follow_redirects=False, timeout=15, **kwargs)


ConsoleFactory = Callable[..., AbstractContextManager[Console]]


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    with smtp_server() as server:
        yield server


@pytest.fixture
def start_console(db_url: str, smtp: SmtpServer) -> ConsoleFactory:
    @contextmanager
    def start(*, limits: Limits | None = None, clock: FakeClock | None = None,
              secure_cookies: bool = False, **overrides: Any) -> Iterator[Console]:
        settings = router_settings(db_url, smtp_host=smtp.host, smtp_port=smtp.port,
                                   smtp_starttls=False, **overrides)
        if secure_cookies:
            settings = served_over_https(settings)
        changes: dict[str, Any] = {}
        if limits is not None:
            changes["limits"] = limits
        if clock is not None:
            limiter = InMemoryRateLimiter(clock=clock.monotonic)
            changes.update(clock=clock.now, limiter=lambda: limiter)
        service = create_app(settings, developer_overrides=changes)
        with serve_router(service, settings) as url:
            yield Console(url, settings.bind_port, settings, smtp)
    return start


def served_over_https(settings: Settings) -> Settings:
    """The same settings with the service hosts' URLs on https, as the cluster topology and
    production have them: the cookies are Secure and ``__Host-`` named (the server itself
    still answers plain http on loopback, as it does behind a TLS edge)."""
    return replace(settings, **{name: "https://" + getattr(settings, name).removeprefix("http://")
                                for name in ("base_url", "portal_url", "console_url",
                                             "docs_url")})


@pytest.fixture
def console(start_console: ConsoleFactory) -> Iterator[Console]:
    with start_console() as running:
        yield running


@pytest.fixture
def developer(sessions: sessionmaker[Session]) -> tuple[str, str]:
    """A verified developer ``dev1`` (password ``PASSWORD``): (developer_id, org_id)."""
    return add_developer(sessions, "dev1", PASSWORD)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def chrome(browser: Browser) -> Iterator[BrowserSession]:
    with browser_session(browser) as opened:
        yield opened


def csrf_of(response: httpx.Response) -> str:
    found = CSRF_RE.search(response.text)
    assert found, response.text
    return found.group(1)


def key_form_of(response: httpx.Response) -> dict[str, str]:
    """The hidden fields of the create-key form on a page: the CSRF token and the form's
    one-time token (one key per form)."""
    found = FORM_TOKEN_RE.search(response.text)
    assert found, response.text
    return {"csrf": csrf_of(response), "formToken": found.group(1)}


def form_post(client: httpx.Client, path: str, data: dict[str, Any],
              csrf_page: str | None = None, **kwargs: Any) -> httpx.Response:
    """POST a form the way a browser would: with the token of the page it came from."""
    if csrf_page is not None:
        data = {"csrf": csrf_of(client.get(csrf_page)), **data}
    return client.post(path, data=data, **kwargs)


def log_in(client: httpx.Client, login: str = "dev1", password: str = PASSWORD) -> httpx.Response:
    response = form_post(client, "/login", {"login": login, "password": password}, "/login")
    assert response.status_code == 303, response.text
    return response
