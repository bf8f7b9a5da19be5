"""``{portal_url}/authorize`` (spec 4.7, 5.5, 3.5): refusals in words, the CSP and framing
rules, the current-budget shortcut and ``forceAuthorize``, a declined signature, account
binding through a backend handoff, and the dev wallet."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import Page
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.db import utcnow
from payments.ledger.handoffs import Handoff, encode_handoff
from payments.ledger.models import AccountConnection, AuthorizationStatus
from payments.models import AppStatus
from router.settings import DEV_SECRET_KEY
from tests.factories import update_app
from tests.ledger.flow import sign_permit, start_handoff
from tests.portal.wallet_world import (
    PICKERS_AT_SIGNING,
    Portal,
    alter_permits,
    assert_clean,
    authorize_url,
    new_wallet,
    portal_world,
    wait_for,
)
from tests.support.browser import BrowserSession, screenshot
from tests.support.router import RouterFactory

SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def portal_client(portal: Portal) -> httpx.Client:
    return httpx.Client(base_url=portal.router.url, timeout=15, follow_redirects=False,
                        headers={"host": f"portal.localhost:{portal.router.port}"})


def csp_of(response: httpx.Response) -> dict[str, list[str]]:
    policy = response.headers["content-security-policy"]
    return {d.split()[0]: d.split()[1:] for d in policy.split(";") if d.strip()}


@SQLITE_ONLY
def test_refused_requests_are_explained_never_signed(
        start_router: RouterFactory, sessions: sessionmaker[Session],
        chrome: BrowserSession) -> None:
    with portal_world(start_router, sessions) as portal, portal_client(portal) as client:
        def get(url: str) -> httpx.Response:
            return client.get(url.removeprefix(portal.url))

        refused = {
            "another site": "https://evil.example/game",
            "another app's entry": f"{portal.url}/other",
            "userinfo": f"http://user@portal.localhost:{portal.router.port}/game",
            "fragment": f"{portal.url}/game#x",
            "localhost, wrong first segment": "http://localhost:5173/other/cb",
            "javascript": "javascript:alert(1)",
        }
        for why, target in refused.items():
            response = get(authorize_url(portal, target))
            assert response.status_code == 400, why
            assert "This return address is not allowed" in response.text, why
            assert "<script" not in response.text, why  # nothing to sign on a refusal
        # the runtime host is a valid return only once it is served (verified, approved)
        inactive = get(authorize_url(portal, f"{portal.runtime}/svc-auth-return?app=game"))
        assert inactive.status_code == 400 and "not served yet" in inactive.text
        assert get(authorize_url(portal, "http://127.0.0.1:5173/game/cb")).status_code == 200
        assert get(f"{portal.url}/authorize?app=game").status_code == 400
        assert get(authorize_url(portal).replace("app=game", "app=nope")).status_code == 404
        # handoff tokens: forged, expired, another app's
        assert get(authorize_url(portal, handoff="abc.def")).status_code == 400
        expired = encode_handoff(DEV_SECRET_KEY, Handoff(portal.world.app.id, "h", "P",
                                                         utcnow().replace(year=2020)))
        gone = get(authorize_url(portal, handoff=expired))
        assert gone.status_code == 410 and "expired" in gone.text
        other = encode_handoff(DEV_SECRET_KEY, Handoff("zapp_other", "h", "P",
                                                       utcnow().replace(year=2099)))
        assert get(authorize_url(portal, handoff=other)).status_code == 400
        update_app(sessions, "game", kill_switch=True)
        assert get(authorize_url(portal)).status_code == 403
        update_app(sessions, "game", kill_switch=False, status=AppStatus.SUSPENDED)
        assert get(authorize_url(portal)).status_code == 403
        update_app(sessions, "game", status=AppStatus.ACTIVE)

        page = chrome.new_page()
        shown = page.goto(authorize_url(portal, "https://evil.example/game"))
        assert shown is not None and shown.status == 400
        assert page.locator("h1").inner_text() == "This return address is not allowed"
        assert "its hosted entry" in page.inner_text("main")
        screenshot(page, "portal-authorize-refused")
    assert_clean(chrome)


@SQLITE_ONLY
def test_csp_nonces_and_who_may_frame_the_signing_page(
        start_router: RouterFactory, sessions: sessionmaker[Session],
        chrome: BrowserSession) -> None:
    with portal_world(start_router, sessions, demo=True) as portal, \
            portal_client(portal) as client:
        runtime_return = f"{portal.runtime}/svc-auth-return?app=game"
        normal = client.get(authorize_url(portal).removeprefix(portal.url))
        policy = csp_of(normal)
        nonce = re.findall(r'<script nonce="([^"]+)" src="/assets/[a-z-]+\.js\?v=', normal.text)
        assert len(nonce) == 3 and len(set(nonce)) == 1  # portal.js, dev-wallet.js, page
        assert policy["script-src"] == [f"'nonce-{nonce[0]}'"]
        assert policy["default-src"] == ["'none'"]
        assert policy["frame-ancestors"] == ["'none'"]
        assert policy["require-trusted-types-for"] == ["'script'"]
        assert "unsafe-inline" not in normal.headers["content-security-policy"]
        assert normal.headers["x-frame-options"] == "DENY"
        # every script is ours and external; the JSON block is data, not code
        scripts = re.findall(r"<script([^>]*)>(.*?)</script>", normal.text, re.DOTALL)
        for attrs, body in scripts:
            assert ("src=" in attrs and body == "") or 'type="application/json"' in attrs
        assert client.get(authorize_url(portal).removeprefix(portal.url)).headers[
            "content-security-policy"] != normal.headers["content-security-policy"]  # fresh
        # embed: framable by exactly the app's runtime origin, and only for a runtime return
        embed = client.get(authorize_url(portal, runtime_return, mode="popup", embed="1")
                           .removeprefix(portal.url))
        assert csp_of(embed)["frame-ancestors"] == [portal.runtime]
        assert "x-frame-options" not in embed.headers
        embed_hosted = client.get(authorize_url(portal, mode="popup", embed="1")
                                  .removeprefix(portal.url))
        assert csp_of(embed_hosted)["frame-ancestors"] == ["'none'"]

        # In Chromium: the runtime may frame it, the developer's origin itself may not.
        target = authorize_url(portal, runtime_return, mode="popup", embed="1")
        page = chrome.new_page()
        page.goto(f"{portal.runtime}/")
        frame_it(page, target)
        wait_for(page, lambda: any(f.url == target and f.locator("h1").count() == 1
                                   for f in page.frames))
        other = chrome.new_page()
        assert portal.demo_url is not None
        other.goto(f"{portal.demo_url}/")
        frame_it(other, target)
        wait_for(other, lambda: any("frame-ancestors" in t for t in chrome.log.texts()))
        framed = [f for f in other.frames if f.url == target]
        assert not framed or framed[0].locator("h1").count() == 0
    assert chrome.log.errors == []
    assert [t for t in chrome.log.csp_violations() if "frame-ancestors" not in t] == []


@SQLITE_ONLY
def test_a_refusal_in_the_embed_is_shown_in_the_modal_frame(
        start_router: RouterFactory, sessions: sessionmaker[Session],
        chrome: BrowserSession) -> None:
    """The runtime's modal frames the embed; a refusal there (the app switched off) must
    show its words to the player, not a frame the browser blocked."""
    with portal_world(start_router, sessions, demo=True) as portal, \
            portal_client(portal) as client:
        runtime_return = f"{portal.runtime}/svc-auth-return?app=game"
        # the player's page was loaded before the operator switched the app off
        page = chrome.new_page()
        page.goto(f"{portal.runtime}/")
        update_app(sessions, "game", kill_switch=True)
        target = authorize_url(portal, runtime_return, mode="popup", embed="1")
        refused = client.get(target.removeprefix(portal.url))
        assert refused.status_code == 403
        assert csp_of(refused)["frame-ancestors"] == [portal.runtime]
        assert "x-frame-options" not in refused.headers
        assert "<script" not in refused.text and "<form" not in refused.text
        assert "<a " not in refused.text.split("<main", 1)[1]  # nothing to click inside
        # the same refusal outside the embed, or one whose link names no runtime we could
        # derive, stays unframable
        whole = client.get(authorize_url(portal, runtime_return).removeprefix(portal.url))
        assert csp_of(whole)["frame-ancestors"] == ["'none'"]
        assert whole.headers["x-frame-options"] == "DENY"
        for query in ({"app": "Bad;Slug"}, {"return": "https://evil.example/game"},
                      {"return": f"{portal.url}/game"}):
            odd = client.get(authorize_url(portal, runtime_return, mode="popup", embed="1",
                                           **query).removeprefix(portal.url))
            assert odd.status_code in (400, 403, 404), query
            assert csp_of(odd)["frame-ancestors"] == ["'none'"], query
        # a local-dev return: the refusal may be framed by that local origin
        local = client.get(authorize_url(portal, "http://127.0.0.1:5173/game/cb", mode="popup",
                                         embed="1").removeprefix(portal.url))
        assert local.status_code == 403
        assert csp_of(local)["frame-ancestors"] == ["http://127.0.0.1:5173"]

        frame_it(page, target)
        wait_for(page, lambda: any(f.url == target and f.locator("h1").count() == 1
                                   for f in page.frames))
        framed = next(f for f in page.frames if f.url == target)
        assert framed.locator("h1").inner_text() == "Game is not taking payments"
    assert chrome.log.errors == [] or all("403" in e for e in chrome.log.errors)
    assert not any("frame-ancestors" in t for t in chrome.log.texts())


def frame_it(page: Page, url: str) -> None:
    page.evaluate("""(url) => { const f = document.createElement("iframe");
                                f.src = url; document.body.appendChild(f); }""", url)


@SQLITE_ONLY
def test_current_budget_shortcut_and_force_authorize(
        start_router: RouterFactory, sessions: sessionmaker[Session],
        chrome: BrowserSession) -> None:
    wallet = new_wallet(5).install(chrome.context)
    with portal_world(start_router, sessions) as portal:
        existing = portal.world.authorize(wallet.account, 5_000_000)["summary"]
        page = chrome.new_page()
        page.goto(authorize_url(portal))
        page.get_by_role("button", name="Connect wallet").click()
        text = page.locator("#existing-text")
        text.wait_for()
        assert "already has a budget: 5.00 USDC left" in text.inner_text()
        assert page.locator("#budget-form").is_hidden()
        screenshot(page, "portal-authorize-existing-budget")
        page.get_by_role("button", name="Continue with this budget").click()
        page.wait_for_url(f"{portal.url}/game")
        assert wallet.typed == []  # no permit: one gas-free owner proof
        assert wallet.texts[0].startswith("Confirm this wallet for a payment budget.")
        assert f"Authorization: {existing['authorizationId']}" in wallet.texts[0]

        # forceAuthorize=1: the shortcut is skipped even though the budget is active
        page.goto(authorize_url(portal, forceAuthorize="1"))
        page.get_by_role("button", name="Connect wallet").click()
        page.get_by_role("button", name="Sign budget permit").wait_for()
        assert page.locator("#existing").is_hidden()
        assert "You asked to renew" in page.inner_text("main")
        page.get_by_role("button", name="Sign budget permit").click()
        page.wait_for_url(f"{portal.url}/game")
        statuses = [b.status for b in portal.budgets(wallet.address)]
        assert statuses == [AuthorizationStatus.SUPERSEDED, AuthorizationStatus.ACTIVE]
        assert [t["message"]["nonce"] for t in wallet.typed] == ["1"]  # after nonce 0
    assert_clean(chrome)


@SQLITE_ONLY
def test_declined_signature_changes_nothing(
        start_router: RouterFactory, sessions: sessionmaker[Session],
        chrome: BrowserSession) -> None:
    wallet = new_wallet(6).install(chrome.context)
    with portal_world(start_router, sessions) as portal:
        page = chrome.new_page()
        page.goto(authorize_url(portal))
        page.get_by_role("button", name="Connect wallet").click()
        wallet.reject = True
        page.get_by_role("button", name="Sign budget permit").click()
        page.get_by_role("alert").get_by_text("You declined in your wallet. Nothing was "
                                              "signed.").wait_for()
        assert portal.budgets(wallet.address) == []
        page.get_by_role("button", name="Sign budget permit").click()  # then it works
        page.wait_for_url(f"{portal.url}/game")
        assert len(portal.budgets(wallet.address)) == 1
    assert_clean(chrome)


def test_account_binding_from_a_backend_handoff(
        start_router: RouterFactory, sessions: sessionmaker[Session], chrome: BrowserSession,
        request: pytest.FixtureRequest) -> None:
    wallet = new_wallet(7).install(chrome.context)
    with portal_world(start_router, sessions) as portal:
        started = start_handoff(portal.world, "merchant-42")
        assert started.json()["status"] == "needs_connection"
        portal_url = started.json()["handoff"]["portalUrl"]
        page = chrome.new_page()
        page.goto(portal_url)
        assert "links your game account Player One in Game" in page.inner_text("main")
        if request.node.callspec.params.get("db_url") == "sqlite":
            screenshot(page, "portal-authorize-handoff")
        page.get_by_role("button", name="Connect wallet").click()
        page.get_by_role("button", name="Sign budget permit").click()
        page.wait_for_url(f"{portal.url}/game")
        with portal.world.sessions() as session:
            bound = session.scalars(select(AccountConnection)).one()
        assert bound.owner_wallet == wallet.address
        again = start_handoff(portal.world, "merchant-42").json()
        assert again["status"] == "ready"
        assert again["connection"]["id"] == bound.id
        assert again["connection"]["budgetRemaining"] == "5000000"

        # needs_budget: the connection stays, the budget is gone; the portal renews it
        with portal.world.api(origin=portal.url) as api:
            assert api.post("/api/authorizations/revoke", json={"permit": sign_permit(
                wallet.account, 0, nonce=1)}).status_code == 200
        low = start_handoff(portal.world, "merchant-42").json()
        assert low["status"] == "needs_budget"
        assert "renew=1" in low["handoff"]["portalUrl"]
        page.goto(low["handoff"]["portalUrl"])
        assert "You asked to renew" in page.inner_text("main")
        page.get_by_role("button", name="Connect wallet").click()
        page.get_by_role("button", name="Sign budget permit").click()
        page.wait_for_url(f"{portal.url}/game")
        renewed = start_handoff(portal.world, "merchant-42").json()
        assert renewed["status"] == "ready" and renewed["connection"]["id"] == bound.id
        assert [t["message"]["nonce"] for t in wallet.typed] == ["0", "2"]  # after the revoke

        # a second game account, linked with the budget the wallet has: the gas-free check
        # the wallet is asked to sign names the game account it links
        other = start_handoff(portal.world, "merchant-43", gameAccountLabel="Player Two").json()
        assert other["status"] == "needs_connection"
        page.goto(other["handoff"]["portalUrl"])
        page.get_by_role("button", name="Connect wallet").click()
        page.get_by_role("button", name="Continue with this budget").click()
        page.wait_for_url(f"{portal.url}/game")
        assert wallet.texts[-1].endswith("Links game account: Player Two\nThis game account "
                                         "in game may then spend this budget.")
        assert start_handoff(portal.world, "merchant-43").json()["status"] == "ready"
    assert_clean(chrome)


@SQLITE_ONLY
def test_dev_wallet_clicks_through_without_an_extension(
        start_router: RouterFactory, sessions: sessionmaker[Session],
        chrome: BrowserSession) -> None:
    with portal_world(start_router, sessions) as portal:
        page = chrome.new_page()
        page.goto(authorize_url(portal))
        assert page.evaluate("window.ethereum === undefined")  # no extension in this browser
        page.get_by_role("button", name="Connect wallet").click()
        page.get_by_role("alert").get_by_text("No browser wallet was found").wait_for()
        page.get_by_role("button", name="Use dev wallet (test funds, dev mode only)").click()
        status = page.locator("#wallet-status")
        wait_for(page, lambda: "dev wallet" in status.inner_text())
        address = re.search(r"0x[0-9a-f]{40}", status.inner_text())
        assert address
        sign = page.get_by_role("button", name="Sign budget permit")
        sign.wait_for()  # the screenshot shows the next step, not "Waiting for your wallet"
        screenshot(page, "portal-authorize-dev-wallet")
        sign.click()
        page.wait_for_url(f"{portal.url}/game")
        budget = portal.active_budget(address.group(0))
        assert budget is not None and budget.value_atomic == 5_000_000
        with portal_client(portal) as client:
            funded = client.get("/api/public/usdc-balance", params={"address": address.group(0)})
        assert funded.json()["balanceAtomic"] == "100000000"  # the in-process faucet
    assert_clean(chrome)



@SQLITE_ONLY
def test_a_permit_for_another_amount_or_expiry_is_never_signed(
        start_router: RouterFactory, sessions: sessionmaker[Session],
        chrome: BrowserSession) -> None:
    """The page checks the permit it is handed against the amount and expiry the person
    chose (and the page describes) before the wallet sees it: a different value or deadline
    is refused in words, nothing is signed or sent. While the wallet is asked, the choice
    cannot change."""
    wallet = new_wallet(9).install(chrome.context)
    chrome.context.add_init_script(PICKERS_AT_SIGNING)
    with portal_world(start_router, sessions) as portal:
        deadline = str(int(utcnow().timestamp()) + 400 * 86400)
        for changes in ({"value": "50000000"}, {"deadline": deadline}):
            page = chrome.new_page()
            alter_permits(page, portal, **changes)
            page.goto(authorize_url(portal))
            page.get_by_role("button", name="Connect wallet").click()
            page.get_by_role("button", name="Sign budget permit").click()
            page.get_by_role("alert").get_by_text(
                "The permit prepared for your wallet is not for the amount and expiry you "
                "chose. Nothing was signed; try again.").wait_for()
            assert page.get_by_role("button", name="Sign budget permit").is_enabled()
            assert page.locator("#amount").is_enabled()
            page.close()
        assert wallet.typed == []
        assert portal.budgets(wallet.address) == []

        page = chrome.new_page()  # as asked: signed, the choice held still meanwhile
        page.goto(authorize_url(portal))
        page.get_by_role("button", name="Connect wallet").click()
        page.locator("#amount").select_option("10000000")
        page.get_by_role("button", name="Sign budget permit").click()
        page.wait_for_url(f"{portal.url}/game")
        assert page.evaluate("sessionStorage.getItem('pickersEnabledAtSigning')") == (
            "[false,false]")
        assert [t["message"]["value"] for t in wallet.typed] == ["10000000"]
        budget = portal.active_budget(wallet.address)
        assert budget is not None and budget.value_atomic == 10_000_000
    assert_clean(chrome)
