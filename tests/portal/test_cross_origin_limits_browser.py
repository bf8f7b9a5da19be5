"""A refused (429 ``rate_limited``) answer of a CORS endpoint tells a page of another origin,
in real Chromium, how long to wait: Retry-After is not a CORS-safelisted response header,
so unless the answer exposes it by name ``response.headers.get("retry-after")`` is null.
The endpoints of ours that are read cross-origin and can answer 429: the public balance
read (any site; a game's runtime page) and ``return-code`` (the portal's pages, on the API
host)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from payments.developer.services import Limits
from payments.ratelimit import Limit
from tests.portal.wallet_world import assert_clean, authorize_url, portal_world
from tests.support.browser import BrowserSession
from tests.support.router import RouterFactory

SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
SMALL = replace(Limits(), public_balance=Limit("public-balance", 2, 60),
                return_code=Limit("return-code", 2, 600))

# Three calls from the page; what the page can read of each.
CALLS = """async ([url, init]) => {
  const seen = [];
  for (let i = 0; i < 3; i++) {
    const response = await fetch(url, Object.assign({cache: "no-store"}, init));
    seen.push({status: response.status, retryAfter: response.headers.get("retry-after"),
               body: await response.json()});
  }
  return seen;
}"""


def assert_third_refused_readably(seen: list[dict[str, Any]], first: int) -> None:
    assert [answer["status"] for answer in seen] == [first, first, 429], seen
    refused = seen[2]
    assert refused["body"]["code"] == "rate_limited"
    assert refused["retryAfter"] is not None, "Retry-After is not readable cross-origin"
    assert refused["retryAfter"] == str(refused["body"]["retryAfter"])


@SQLITE_ONLY
def test_pages_of_other_origins_read_retry_after_of_a_refusal(
        start_router: RouterFactory, sessions: sessionmaker[Session],
        chrome: BrowserSession) -> None:
    overrides = {"developer_overrides": {"limits": SMALL}}
    with portal_world(start_router, sessions, demo=True, app_options=overrides) as portal:
        page = chrome.new_page()
        # A game's runtime page reads the public balance of its user's wallet.
        page.goto(f"{portal.runtime}/")
        balance = f"{portal.url}/api/public/usdc-balance?address=0x{'1' * 40}"
        assert_third_refused_readably(page.evaluate(CALLS, [balance, {}]), 200)

        # The portal's authorize page asks the API host for a return code (here with no
        # body to sign: each call is counted before it is read, and refused 422).
        page.goto(authorize_url(portal))
        return_code = f"{portal.router.settings.base_url}/api/authorizations/return-code"
        post = {"method": "POST", "headers": {"content-type": "application/json"},
                "body": "{}", "credentials": "omit"}
        assert_third_refused_readably(page.evaluate(CALLS, [return_code, post]), 422)
    assert_clean(chrome)
