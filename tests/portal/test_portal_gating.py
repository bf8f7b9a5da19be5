"""Which apps the portal shows (spec 2.2, docs/portal.md): the hosted entry ``/<slug>`` and
the account page's Ready Apps only for listed, active apps without the kill switch; and the
authorize page's primary actions reachable and usable with the keyboard alone.

The gating tests read server-rendered HTML over plain HTTP (no browser); the keyboard test
drives real Chromium with the dev wallet, so no injected ``window.ethereum`` is involved.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session, sessionmaker

from payments.models import AppStatus, ListingStatus
from tests.factories import add_app
from tests.portal.wallet_world import assert_clean, authorize_url, portal_world, wait_for
from tests.support.browser import BrowserSession
from tests.support.router import RouterFactory, RunningRouter

SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

READY_RE = re.compile(r'<section aria-labelledby="ready-h">(.*?)</section>', re.S)
LINK_RE = re.compile(r'<a href="/([^"]*)">([^<]*)</a>')

# Two public apps, and one app per reason to hide it: each differs from a public app in
# exactly one field. Every non-listed listing status is covered, new ones included.
PUBLIC = {"orchard": "Orchard Quest", "lantern": "Lantern Tales"}
HIDDEN: dict[str, dict[str, Any]] = {
    "sleeper": {"name": "Sleeper Suspended", "status": AppStatus.SUSPENDED},
    "cutoff": {"name": "Cutoff Killed", "kill_switch": True, "kill_switch_reason": "abuse"},
    **{f"hidden-{s.value.replace('_', '-')}": {"name": f"Hidden {s.value}",
                                               "portal_listing_status": s}
       for s in ListingStatus if s != ListingStatus.LISTED},
}


def add_gated_apps(sessions: sessionmaker[Session]) -> None:
    for slug, name in PUBLIC.items():
        add_app(sessions, slug, name=name, headline=f"{name} headline")
    for slug, fields in HIDDEN.items():
        add_app(sessions, slug, **{"portal_listing_status": ListingStatus.LISTED,
                                   "headline": f"{fields['name']} headline", **fields})


@contextmanager
def gated_portal(start_router: RouterFactory,
                 sessions: sessionmaker[Session]) -> Iterator[httpx.Client]:
    with start_router() as router:
        add_gated_apps(sessions)
        with portal_client(router) as client:
            yield client


def portal_client(router: RunningRouter) -> httpx.Client:
    return httpx.Client(base_url=router.url, timeout=15, follow_redirects=False,
                        headers={"host": f"portal.localhost:{router.port}"})


def test_hosted_entry_only_for_listed_active_apps(
        start_router: RouterFactory, sessions: sessionmaker[Session]) -> None:
    assert {"unlisted", "pending-review", "rejected"} <= {s.removeprefix("hidden-")
                                                          for s in HIDDEN}
    with gated_portal(start_router, sessions) as client:
        for slug, name in PUBLIC.items():
            entry = client.get(f"/{slug}")
            assert entry.status_code == 200, (slug, entry.text)
            assert f"<h1>{name}</h1>" in entry.text
            assert f"{name} headline" in entry.text
        for slug, fields in HIDDEN.items():
            entry = client.get(f"/{slug}")
            # docs/portal.md and hosted.listed(): 404 unless listed, active and not killed
            assert entry.status_code == 404, (slug, entry.status_code)
            assert "<h1>App not found</h1>" in entry.text
            assert fields["name"] not in entry.text  # no profile leaks
            assert "hosted.js" not in entry.text  # and no buying script
        assert client.get("/no-such-app").status_code == 404


def test_ready_apps_lists_exactly_the_listed_active_apps(
        start_router: RouterFactory, sessions: sessionmaker[Session]) -> None:
    with gated_portal(start_router, sessions) as client:
        page = client.get("/account")
    assert page.status_code == 200
    ready = READY_RE.search(page.text)
    assert ready, page.text
    assert "<h2 id=\"ready-h\">Ready Apps</h2>" in ready.group(1)
    # each a link to its hosted entry, once, ordered by name
    assert LINK_RE.findall(ready.group(1)) == sorted(
        PUBLIC.items(), key=lambda item: item[1])
    for slug, fields in HIDDEN.items():
        assert f'href="/{slug}"' not in page.text
        assert fields["name"] not in page.text


def tab_to(page: Page, element_id: str, limit: int = 20) -> list[str]:
    """Press Tab until ``#element_id`` has focus; the ids (or tags) focused on the way."""
    seen: list[str] = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        seen.append(page.evaluate(
            "() => document.activeElement.id || document.activeElement.tagName"))
        if seen[-1] == element_id:
            return seen
    raise AssertionError(f"Tab never reached #{element_id}: {seen}")


@SQLITE_ONLY
def test_authorize_with_the_keyboard_only(
        start_router: RouterFactory, sessions: sessionmaker[Session],
        chrome: BrowserSession) -> None:
    with portal_world(start_router, sessions) as portal:
        page = chrome.new_page()
        page.goto(authorize_url(portal))
        expect(page.locator("#dev-wallet")).to_be_enabled()  # the scripts have run

        # Connect wallet: reached by Tab, Enter runs it (no extension here, so it says so).
        tab_to(page, "connect")
        page.keyboard.press("Enter")
        page.get_by_role("alert").get_by_text("No browser wallet was found").wait_for()
        # The dev wallet is the next stop, and Enter connects it.
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.id") == "dev-wallet"
        page.keyboard.press("Enter")
        status = page.locator("#wallet-status")
        wait_for(page, lambda: "dev wallet" in status.inner_text())
        address = re.search(r"0x[0-9a-f]{40}", status.inner_text())
        assert address
        # Focus moves into the budget step; Tab reaches the sign button, Enter signs.
        expect(page.locator("#amount")).to_be_focused()
        assert tab_to(page, "sign") == ["days", "sign"]
        page.keyboard.press("Enter")
        page.wait_for_url(f"{portal.url}/game")
        budget = portal.active_budget(address.group(0))
        assert budget is not None and budget.value_atomic == 5_000_000
    assert_clean(chrome)
