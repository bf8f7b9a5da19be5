"""The portal host's JSON endpoints and static files over real HTTP (no browser): CSRF, the
wallet-ownership proof and its session, what the wallet is asked to sign, renewals,
the dev wallet (dev only), and bad input answered in the envelope, never a 500."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from eth_account import Account
from eth_account.messages import encode_defunct, encode_typed_data
from eth_account.signers.local import LocalAccount
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.db import utcnow
from payments.ledger.models import AccountConnection
from payments.ledger.permits import owner_proof_text
from portal.csrf import page_token
from router.settings import DEV_SECRET_KEY
from tests.ledger.flow import (
    PARAMS,
    connect,
    handoff_token,
    sign_permit,
    start_handoff,
    wallet,
)
from tests.portal.wallet_world import Portal, authorize_url, portal_world
from tests.support.router import RouterFactory


@pytest.fixture
def portal(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[Portal]:
    with portal_world(start_router, sessions) as running:
        yield running


def client(portal: Portal, **headers: str) -> httpx.Client:
    return httpx.Client(base_url=portal.router.url, timeout=15, follow_redirects=False,
                        headers={"host": f"portal.localhost:{portal.router.port}", **headers})


def writer(portal: Portal, token: str | None = None) -> httpx.Client:
    """A page of the portal: its origin and its CSRF token on every write."""
    return client(portal, origin=portal.url,
                  **{"x-csrf-token": token or page_token(DEV_SECRET_KEY, utcnow())})


def sign_text(account: LocalAccount, text: str) -> str:
    signed = Account.sign_message(encode_defunct(text=text), account.key)
    return "0x" + str(signed.signature.hex()).removeprefix("0x")


def prove(portal: Portal, account: LocalAccount) -> tuple[httpx.Client, dict[str, Any]]:
    """Open a wallet session; returns a client holding its cookie, and the account view."""
    session = writer(portal)
    challenge = session.post("/api/portal/wallet-proof/challenge",
                             json={"address": account.address}).json()
    proved = session.post("/api/portal/wallet-proof", json={
        "challenge": challenge["challenge"],
        "signature": sign_text(account, challenge["message"])})
    assert proved.status_code == 200, proved.text
    return session, proved.json()


def test_writes_need_the_portal_origin_a_token_and_json(portal: Portal) -> None:
    body = {"address": wallet(1).address}
    path = "/api/portal/wallet-proof/challenge"
    token = page_token(DEV_SECRET_KEY, utcnow())
    cases = {
        "no origin": client(portal, **{"x-csrf-token": token}),
        "another origin": client(portal, origin=portal.runtime, **{"x-csrf-token": token}),
        "no token": client(portal, origin=portal.url),
        "forged token": client(portal, origin=portal.url, **{"x-csrf-token": "9999999999.x"}),
        "expired token": writer(portal, page_token(DEV_SECRET_KEY, utcnow() - timedelta(hours=3))),
        "another secret": writer(portal, page_token("another-secret", utcnow())),
    }
    for why, c in cases.items():
        with c:
            response = c.post(path, json=body)
        assert response.status_code == 403, why
        assert response.json()["code"] == "csrf_failed", why
    with client(portal, origin=portal.url) as c:  # a token that is not even ASCII
        response = c.post(path, json=body, headers=[(b"x-csrf-token", b"1.\xe9")])
        assert response.status_code == 403
        # Latin-1 0xB2 is "\u00b2": a digit to str.isdigit(), a ValueError to int() (a 500 once)
        response = c.post(path, json=body, headers=[(b"x-csrf-token", b"\xb2.x")])
        assert (response.status_code, response.json()["code"]) == (403, "csrf_failed")
    with writer(portal) as c:
        assert c.post(path, content=b"address=1",
                      headers={"content-type": "application/x-www-form-urlencoded"}
                      ).status_code == 415
        assert c.post(path, json=body).status_code == 200
        # no CORS for the portal API: another origin's preflight is not granted
        assert "access-control-allow-origin" not in c.options(path).headers


def test_wallet_proof_opens_one_session_per_signed_challenge(portal: Portal) -> None:
    owner, stranger = wallet(1), wallet(2)
    with writer(portal) as c:
        challenge = c.post("/api/portal/wallet-proof/challenge",
                           json={"address": owner.address}).json()
        message = challenge["message"]
        assert owner.address.lower() in message and "not a payment" in message
        assert "Permit" not in message  # gas-free text, never a permit
        wrong = c.post("/api/portal/wallet-proof", json={
            "challenge": challenge["challenge"], "signature": sign_text(stranger, message)})
        assert (wrong.status_code, wrong.json()["code"]) == (422, "wallet_proof_invalid")
        tampered = challenge["challenge"].replace(challenge["challenge"][5], "A", 1)
        assert c.post("/api/portal/wallet-proof", json={
            "challenge": tampered, "signature": sign_text(owner, message)}).status_code == 422
        good = c.post("/api/portal/wallet-proof", json={
            "challenge": challenge["challenge"], "signature": sign_text(owner, message)})
        assert good.status_code == 200, good.text
        cookie = good.headers["set-cookie"]
        assert cookie.startswith("svc_portal_wallet=")
        attributes = {a.strip().split("=")[0].lower() for a in cookie.split(";")[1:]}
        assert attributes == {"httponly", "path", "samesite"}  # no Domain, no Max-Age
        assert "samesite=strict" in cookie.lower()
        assert good.json()["wallet"] == owner.address.lower()
        # the same signed challenge cannot open a second session
        again = c.post("/api/portal/wallet-proof", json={
            "challenge": challenge["challenge"], "signature": sign_text(owner, message)})
        assert (again.status_code, again.json()["code"]) == (409, "wallet_proof_used")
        assert c.get("/api/portal/account").status_code == 200  # the cookie from `good`
    with client(portal) as anonymous:
        missing = anonymous.get("/api/portal/account")
        assert (missing.status_code, missing.json()["code"]) == (401, "wallet_proof_required")
        anonymous.cookies.set("svc_portal_wallet", "forged")
        assert anonymous.get("/api/portal/account").status_code == 401


def test_session_mutations_need_the_session_token(portal: Portal) -> None:
    owner, other = wallet(3), wallet(4)
    world = portal.world
    mine = connect(world, owner, "player-a", 1_000_000)["summary"]["accountConnectionId"]
    theirs = connect(world, other, "player-b", 1_000_000, nonce=0)["summary"][
        "accountConnectionId"]
    session, view = prove(portal, owner)
    assert [c["id"] for c in view["connections"]] == [mine]
    try:
        path = f"/api/portal/connections/{mine}/unlink"
        # the page token is not enough once a wallet session exists
        refused = session.post(path, json={})
        assert (refused.status_code, refused.json()["code"]) == (403, "csrf_failed")
        session.headers["x-csrf-token"] = view["csrfToken"]
        stranger = session.post(f"/api/portal/connections/{theirs}/unlink", json={})
        assert (stranger.status_code, stranger.json()["code"]) == (404, "connection_not_found")
        unlinked = session.post(path, json={})
        assert unlinked.status_code == 200 and unlinked.json()["connections"] == []
        assert session.post(path, json={}).status_code == 404  # already unlinked
        forgotten = session.post("/api/portal/wallet-proof/forget", json={})
        assert forgotten.status_code == 200
        assert 'svc_portal_wallet=""' in forgotten.headers["set-cookie"]
        session.cookies.clear()
        assert session.get("/api/portal/account").status_code == 401
    finally:
        session.close()


def test_permit_to_sign_and_the_next_nonce(portal: Portal) -> None:
    owner = wallet(5)
    deadline = int((utcnow() + timedelta(days=30)).timestamp())

    def permit(**params: Any) -> httpx.Response:
        with client(portal) as c:
            return c.get("/api/portal/permit", params={
                "owner": owner.address, "value": "5000000", "deadline": deadline, **params})

    typed = permit().json()["typedData"]
    assert typed["primaryType"] == "Permit"
    assert [f["name"] for f in typed["types"]["Permit"]] == [
        "owner", "spender", "value", "nonce", "deadline"]
    assert typed["domain"]["verifyingContract"] == PARAMS.token
    assert typed["message"] == {"owner": owner.address.lower(), "spender": PARAMS.spender,
                                "value": "5000000", "nonce": "0", "deadline": str(deadline)}
    # "\u00b2" is a digit to str.isdigit() but not to int() (a 500 once); the Arabic-Indic
    # "\u0661\u0660\u0660\u0660\u0660" was read as 10000.
    for bad in ({"owner": "0x12"}, {"value": "-1"}, {"value": "1e6"},
                {"value": str(10**16)}, {"deadline": "12"}, {"deadline": str(deadline * 10)},
                {"value": "\u00b2"}, {"value": "\u0661\u0660\u0660\u0660\u0660"},
                {"deadline": "\u00b2"}, {"value": " 5000000"}):
        response = permit(**bad)
        assert response.status_code == 422, bad
        assert set(response.json()) >= {"code", "message"}
        assert response.json()["code"] == ("invalid_address" if "owner" in bad
                                           else "invalid_field"), bad
    # the token's nonce only moves when a permit is relayed: the ledger's record counts too
    portal.world.authorize(owner, 5_000_000, nonce=0)
    assert permit().json()["typedData"]["message"]["nonce"] == "1"
    revoke = sign_permit(owner, 0, nonce=1)
    with portal.world.api(origin=portal.url) as api:
        assert api.post("/api/authorizations/revoke", json={"permit": revoke}).status_code == 200
    assert permit().json()["typedData"]["message"]["nonce"] == "2"
    assert permit(value="0", deadline=str(int(utcnow().timestamp()) + 60)).status_code == 200


def test_owner_proof_text_and_renewal(portal: Portal) -> None:
    owner = wallet(6)
    return_url = f"{portal.url}/game"
    with client(portal) as c:
        params = {"owner": owner.address, "app": "game", "returnUrl": return_url}
        none = c.get("/api/portal/owner-proof", params=params)
        assert (none.status_code, none.json()["code"]) == (402, "needs_budget")
        bad = c.get("/api/portal/owner-proof", params={**params, "returnUrl": "https://x.y/z"})
        assert (bad.status_code, bad.json()["code"]) == (422, "return_url_not_allowed")
        assert c.get("/api/portal/owner-proof", params={**params, "app": "nope"}
                     ).status_code == 404
        budget = portal.world.authorize(owner, 2_000_000)["summary"]
        proof = c.get("/api/portal/owner-proof", params=params).json()
        assert proof["authorizationId"] == budget["authorizationId"]
        assert proof["text"] == owner_proof_text("game", return_url, PARAMS.spender,
                                                 budget["authorizationId"], proof["issuedAt"])
    # the text is exactly what return-code verifies
    with portal.world.api(origin=portal.url) as api:
        returned = api.post("/api/authorizations/return-code", json={
            "app": "game", "returnUrl": return_url, "ownerProof": {
                "owner": owner.address, "authorizationId": proof["authorizationId"],
                "issuedAt": proof["issuedAt"], "signature": sign_text(owner, proof["text"])}})
    assert returned.status_code == 200, returned.text

    # renewing the global budget from the account page
    with writer(portal) as c:
        renewed = c.post("/api/portal/budget", json={"permit": sign_permit(owner, 7_000_000, 1)})
        assert renewed.status_code == 200, renewed.text
        assert renewed.json()["budget"]["remaining"] == "7000000"
        # Another deadline (in 2514; past 9999 is invalid_permit): another permit, same nonce.
        stale = c.post("/api/portal/budget", json={"permit": sign_permit(owner, 7_000_000, 1,
                                                                          deadline=2**34)})
        assert (stale.status_code, stale.json()["code"]) == (409, "permit_nonce_stale")
        forged = sign_permit(owner, 9_000_000, 2)
        forged["value"] = "9000001"
        assert c.post("/api/portal/budget", json={"permit": forged}).json()["code"] == \
            "invalid_permit_signature"
        with client(portal) as reader:
            state = reader.get("/api/portal/wallet", params={"address": owner.address}).json()
        assert state["budget"]["state"] == "active"
        assert state["budget"]["valueAtomic"] == "7000000"
        assert state["permitNonce"] == "2"


def test_a_return_url_with_a_line_break_or_blank_is_refused_everywhere(portal: Portal) -> None:
    """urlsplit (as browsers) drops tabs and line breaks, so "/ga<LF>me" read as the hosted
    entry "/game", while the string kept, redirected to and signed was another: a line
    break in the owner proof's "Return:" line writes lines of the app's choosing into the
    text the wallet shows. Refused by the page, the owner-proof text and return-code."""
    owner = wallet(7)
    portal.world.authorize(owner, 2_000_000)
    spoofed = [f"{portal.url}/ga\nme", f"{portal.url}/ga\tme", f"{portal.url}/game\r",
               f"{portal.url}/game?x=1\nSpender: 0x{'ab' * 20}", f"{portal.url}/game?x=a b",
               f"{portal.url}/game?x=\u2028", f" {portal.url}/game"]
    with client(portal) as c:
        for url in spoofed:
            page = c.get("/authorize", params={"app": "game", "return": url})
            assert page.status_code == 400, url
            assert "This return address is not allowed" in page.text, url
            text = c.get("/api/portal/owner-proof", params={
                "owner": owner.address, "app": "game", "returnUrl": url})
            assert (text.status_code, text.json()["code"]) == \
                (422, "return_url_not_allowed"), url
        # the plain forms still pass
        assert c.get("/authorize", params={"app": "game", "return": f"{portal.url}/game"}
                     ).status_code == 200
    with portal.world.api(origin=portal.url) as api:
        for url in spoofed:
            returned = api.post("/api/authorizations/return-code", json={
                "app": "game", "returnUrl": url,
                "permit": sign_permit(owner, 1_000_000, 1)})
            assert (returned.status_code, returned.json()["code"]) == \
                (422, "return_url_not_allowed"), url


def test_an_owner_proof_that_links_a_game_account_says_so(portal: Portal) -> None:
    """The gas-free check binds a handoff's game account to the wallet's budget: a link
    someone else made (their own game account) would have it spend this wallet's budget.
    The text the wallet shows names the account, and return-code accepts only that text."""
    owner = wallet(9)
    budget = portal.world.authorize(owner, 3_000_000)["summary"]["authorizationId"]
    token = handoff_token(start_handoff(portal.world, "someone-else").json()["handoff"]
                          ["portalUrl"])
    return_url = f"{portal.url}/game"
    params = {"owner": owner.address, "app": "game", "returnUrl": return_url}
    with client(portal) as c:
        plain = c.get("/api/portal/owner-proof", params=params).json()
        assert "game account" not in plain["text"]
        linked = c.get("/api/portal/owner-proof", params={**params, "handoff": token}).json()
        assert linked["text"] == owner_proof_text(
            "game", return_url, PARAMS.spender, budget, linked["issuedAt"], "Player One")
        assert linked["text"].endswith("\nLinks game account: Player One\nThis game account "
                                       "in game may then spend this budget.")
        forged = c.get("/api/portal/owner-proof", params={**params, "handoff": "abc.def"})
        assert (forged.status_code, forged.json()["code"]) == (422, "handoff_invalid")

    def proof(text: dict[str, Any]) -> dict[str, Any]:
        return {"owner": owner.address, "authorizationId": text["authorizationId"],
                "issuedAt": text["issuedAt"], "signature": sign_text(owner, text["text"])}
    with portal.world.api(origin=portal.url) as api:
        # a check whose text says nothing of the link does not bind it
        silent = api.post("/api/authorizations/return-code", json={
            "app": "game", "returnUrl": return_url, "handoff": token,
            "ownerProof": proof(plain)})
        assert (silent.status_code, silent.json()["code"]) == (422, "invalid_owner_proof")
        with portal.world.sessions() as session:
            assert session.scalars(select(AccountConnection)).all() == []
        bound = api.post("/api/authorizations/return-code", json={
            "app": "game", "returnUrl": return_url, "handoff": token,
            "ownerProof": proof(linked)})
        assert bound.status_code == 200, bound.text
        assert bound.json()["summary"]["accountConnectionId"]


def page_data(page: httpx.Response) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="svc-data">(.*?)</script>',
                      page.text)
    assert found, page.text
    data: dict[str, Any] = json.loads(found.group(1))
    return data


def test_the_wallet_hint_is_shown_only_when_it_is_an_address(portal: Portal) -> None:
    """authorize.js shows walletHint as "The app expected <hint>": anyone can write the
    link, so any text but an address would be the link maker's words on the signing page."""
    address = wallet(8).address
    spoofed = ["Send 25 USDC to unlock your reward", f"{address} and sign 25 USDC",
               "0x" + "g" * 40, address + "\n"]
    with client(portal) as c:
        def hint(value: str) -> object:
            page = c.get("/authorize", params={"app": "game", "return": f"{portal.url}/game",
                                               "walletHint": value})
            assert page.status_code == 200, page.text
            return page_data(page)["walletHint"]
        assert hint(address) == address
        for value in spoofed:
            assert hint(value) is None, value
            page = c.get("/authorize", params={"app": "game", "return": f"{portal.url}/game",
                                               "walletHint": value})
            assert "unlock" not in page.text


def test_dev_wallet_signs_only_our_permit_and_texts(portal: Portal) -> None:
    with writer(portal) as c:
        account = c.post("/api/portal/dev-wallet/account", json={}).json()
        address = account["address"]
        assert account["chainId"] == hex(PARAMS.chain_id)
        assert c.post("/api/portal/dev-wallet/account", json={}
                      ).json()["address"] == address  # one dev key per dev server
        with client(portal) as reader:
            typed = reader.get("/api/portal/permit", params={
                "owner": address, "value": "1000000",
                "deadline": int((utcnow() + timedelta(days=1)).timestamp())}).json()["typedData"]
        signed = c.post("/api/portal/dev-wallet/sign", json={
            "method": "eth_signTypedData_v4", "params": [address, typed]})
        assert signed.status_code == 200
        recovered = Account.recover_message(encode_typed_data(full_message=typed),
                                            signature=signed.json()["result"])
        assert recovered == address
        text = "hello"
        signature = c.post("/api/portal/dev-wallet/sign", json={
            "method": "personal_sign",
            "params": ["0x" + text.encode().hex(), address]}).json()["result"]
        assert Account.recover_message(encode_defunct(text=text), signature=signature) == address
        other = dict(typed, primaryType="Mail")
        refused = [
            {"method": "eth_signTypedData_v4", "params": [address, other]},
            {"method": "eth_signTypedData_v4",
             "params": [address, {**typed, "message": {**typed["message"],
                                                       "spender": PARAMS.token}}]},
            {"method": "eth_sendTransaction", "params": [{}, address]},
            {"method": "personal_sign", "params": ["0x00", PARAMS.token]},
            {"method": "personal_sign", "params": "nope"},
            {"method": "eth_signTypedData_v4",
             "params": [address, "{not json"]},
        ]
        for body in refused:
            response = c.post("/api/portal/dev-wallet/sign", json=body)
            assert response.status_code == 422, body
            assert response.json()["code"] == "invalid_field", body


PRODUCTION = {"mode": "production", "allow_private_origins": False,
              "base_url": "https://api.example.com", "portal_url": "https://portal.example.com",
              "console_url": "https://console.example.com", "docs_url": "https://docs.example.com",
              "apps_scheme": "https", "smtp_host": "127.0.0.1", "secret_key": "k" * 40}


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_no_dev_wallet_outside_dev(start_router: RouterFactory) -> None:
    with start_router(**PRODUCTION) as router, httpx.Client(
            base_url=router.url, headers={"host": "portal.example.com",
                                          "origin": "https://portal.example.com"}) as c:
        for path in ("/api/portal/dev-wallet/account", "/api/portal/dev-wallet/sign"):
            response = c.post(path, json={})
            assert response.status_code == 404, path
            assert response.json()["code"] == "not_found"
        page = c.get("/authorize", params={"app": "nope", "return": "x"})
        assert "dev wallet" not in page.text.lower() and "Dev mode" not in page.text
        assert c.get("/assets/dev-wallet.js").status_code == 200  # inert without the pages
        account = c.get("/account")
        assert "dev-wallet.js" not in account.text and "Use dev wallet" not in account.text
        assert "secure" in c.post("/api/portal/wallet-proof/forget", json={}).headers[
            "set-cookie"].lower()


def test_static_files_and_the_sdk(portal: Portal) -> None:
    with client(portal) as c:
        page = c.get("/account").text
        css = re.search(r'href="(/assets/portal\.css\?v=[0-9a-f]{12})"', page)
        assert css
        fresh = c.get(css.group(1))
        assert fresh.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert fresh.headers["content-type"].startswith("text/css")
        assert fresh.headers["x-content-type-options"] == "nosniff"
        assert c.get("/assets/portal.css").headers["cache-control"] == "public, max-age=300"
        assert c.get("/assets/nope.js").status_code == 404
        assert c.get("/assets/svc-modal.js").status_code == 404  # one URL for the SDK
        sdk = c.get("/sdk/svc-modal.js")
        assert sdk.headers["content-type"].startswith("text/javascript")
        assert sdk.headers["cross-origin-resource-policy"] == "cross-origin"
        assert '"__SVC_CONFIG__"' not in sdk.text
        assert (f'{{"baseUrl": "{portal.router.settings.base_url}", "portalUrl": '
                f'"{portal.url}"}}') in sdk.text
        balance = c.get("/api/public/usdc-balance", params={"address": wallet(9).address})
        assert balance.headers["access-control-allow-origin"] == "*"
        assert balance.json()["balanceAtomic"] == "0"


def test_every_portal_page_isolates_its_window(portal: Portal) -> None:
    """Cross-Origin-Opener-Policy: same-origin on every page: no other site's window keeps
    a handle on a portal page. The runtime modal frames the authorize page (COOP does not
    apply to frames) and opens the account page with noopener, so no flow needs one."""
    runtime_return = f"{portal.runtime}/svc-auth-return?app=game"
    with client(portal) as c:
        for path in ("/", "/game", "/account", "/nope-nope",
                     authorize_url(portal).removeprefix(portal.url),
                     authorize_url(portal, runtime_return, mode="popup", embed="1")
                     .removeprefix(portal.url),
                     authorize_url(portal, "https://elsewhere.example/").removeprefix(portal.url)):
            page = c.get(path)
            assert page.headers["content-type"].startswith("text/html"), path
            assert page.headers["cross-origin-opener-policy"] == "same-origin", path


def test_bad_input_is_answered_in_the_envelope(portal: Portal) -> None:
    junk = ["", "0x", "x" * 5000, "\x00", "%00", "0x" + "g" * 40, "<script>"]
    with client(portal) as reader, writer(portal) as c:
        for value in junk:
            for path, name in (("/api/portal/wallet", "address"), ("/api/portal/permit", "owner"),
                               ("/api/portal/owner-proof", "owner"),
                               ("/api/public/usdc-balance", "address")):
                response = reader.get(path, params={name: value, "value": value,
                                                    "deadline": value, "app": value,
                                                    "returnUrl": value})
                assert 400 <= response.status_code < 500, (path, value)
                assert set(response.json()) >= {"code", "message"}
            for path in ("/api/portal/wallet-proof/challenge", "/api/portal/wallet-proof",
                         "/api/portal/budget", "/api/portal/dev-wallet/sign"):
                for body in ({"address": value, "challenge": value, "signature": value,
                              "permit": value, "method": value, "params": value}, [value],
                             value):
                    response = c.post(path, json=body)
                    assert 400 <= response.status_code < 500, (path, body)
                    assert set(response.json()) >= {"code", "message"}
        for path in ("/authorize?app=%00&return=%00", "/%00", "/account?x=%ff", "/a/b/c",
                     "/authorize?app=game&return=" + "x" * 5000):
            response = reader.get(path)
            assert 200 <= response.status_code < 500, path
            assert "Traceback" not in response.text
