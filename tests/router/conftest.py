"""A real router (uvicorn on loopback) in front of real upstream servers."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser
from sqlalchemy.orm import Session, sessionmaker

from payments.db import make_engine, make_sessionmaker
from tests.support.browser import BrowserSession, browser_session, chromium
from tests.support.router import RouterFactory, RunningRouter, router_factory, router_settings

__all__ = ["RouterFactory", "RunningRouter", "router_settings"]


@pytest.fixture
def proxy_db_url(sqlite_template: Path, tmp_path: Path) -> str:
    """Proxy behaviour does not depend on the backend: these tests run on SQLite only."""
    path = tmp_path / "svc.db"
    shutil.copy(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def proxy_sessions(proxy_db_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(proxy_db_url)
    yield make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture
def start_proxy_router(proxy_db_url: str) -> RouterFactory:
    """Like ``start_router`` but on SQLite only; pair with ``proxy_sessions``."""
    return router_factory(proxy_db_url)


# Real Chromium for the router's page tests: one browser per test module, a fresh context
# per test (tests/support/browser.py).
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def chrome(browser: Browser) -> Iterator[BrowserSession]:
    with browser_session(browser) as opened:
        yield opened
