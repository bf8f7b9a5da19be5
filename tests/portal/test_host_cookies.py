"""`__Host-` cookie names: over https no other host can plant a cookie the portal or the
console reads (cookie tossing from a runtime's script on a shared registrable domain).

Over real HTTP on loopback: the Set-Cookie headers of a Secure configuration, and requests
carrying a plain-named cookie with a valid token, which is what a runtime could plant, are
not signed in. In real Chromium over TLS, with the hosts on a registrable domain the
browser knows (``example.com``, resolved to loopback), a runtime page's
``document.cookie = "...; Domain=example.com"`` does reach the console and does not sign
the visitor in. docs/decisions.md, "`__Host-` cookie names".
"""

from __future__ import annotations

from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme
from eth_account.signers.local import LocalAccount
from sqlalchemy.orm import Session, sessionmaker

from payments.cookies import HOST_PREFIX, CookieNames
from payments.developer.auth import SESSION_COOKIE
from portal.api_account import WALLET_COOKIE
from portal.console.csrf import CSRF_COOKIE
from router.app import create_app
from router.settings import Settings
from tests.factories import add_developer
from tests.ledger.flow import wallet
from tests.portal.conftest import PASSWORD, Console, ConsoleFactory, csrf_of
from tests.portal.test_portal_api import sign_text, writer
from tests.portal.wallet_world import Portal, portal_world
from tests.support.browser import browser_session, chromium
from tests.support.router import RouterFactory, router_settings
from tests.support.servers import serve_router
from tests.support.services import free_port


def _set_cookies(response: httpx.Response) -> dict[str, str]:
    """Each Set-Cookie header by its cookie name."""
    headers = response.headers.get_list("set-cookie")
    return {header.split("=", 1)[0]: header for header in headers}


def _attributes(header: str) -> dict[str, str]:
    """A Set-Cookie header's attributes, names lower-cased (value "" for a flag)."""
    pairs = (part.strip().partition("=") for part in header.split(";")[1:])
    return {name.lower(): value for name, _, value in pairs}


def _assert_host_prefixed(header: str) -> None:
    """What a browser requires of a `__Host-` cookie: Secure, Path=/, no Domain."""
    assert header.startswith(HOST_PREFIX), header
    attributes = _attributes(header)
    assert "secure" in attributes and attributes["path"] == "/", header
    assert "domain" not in attributes and "httponly" in attributes, header


def _log_in(client: httpx.Client) -> tuple[httpx.Response, str]:
    """Sign ``dev1`` in over plain http to a server whose settings say https: httpx keeps
    Secure cookies away from http, so the CSRF cookie goes by hand."""
    form = client.get("/login")
    csrf = SimpleCookie(_set_cookies(form)[HOST_PREFIX + CSRF_COOKIE])[HOST_PREFIX + CSRF_COOKIE]
    assert csrf.value == csrf_of(form)
    signed_in = client.post("/login", data={"csrf": csrf.value, "login": "dev1",
                                            "password": PASSWORD},
                            headers={"cookie": f"{HOST_PREFIX}{CSRF_COOKIE}={csrf.value}"})
    assert signed_in.status_code == 303, signed_in.text
    name = HOST_PREFIX + SESSION_COOKIE
    return signed_in, SimpleCookie(_set_cookies(signed_in)[name])[name].value


def test_the_settings_name_the_cookies() -> None:
    dev = Settings()
    assert not dev.secure_cookies and dev.cookies.name(SESSION_COOKIE) == "svc_console"
    over_https = Settings(portal_url="https://portal.localhost:8443",
                          console_url="https://console.localhost:8443")
    assert over_https.cookies == CookieNames(secure=True)  # the cluster topology: dev, https
    assert Settings(mode="production", allow_private_origins=False).secure_cookies
    half = Settings(console_url="https://console.localhost:8443")  # portal still on http
    assert not half.secure_cookies
    names = CookieNames(secure=True)
    assert [names.name(n) for n in (SESSION_COOKIE, CSRF_COOKIE, WALLET_COOKIE)] == [
        "__Host-svc_console", "__Host-svc_csrf", "__Host-svc_portal_wallet"]


@pytest.mark.usefixtures("developer")
def test_secure_console_cookies_are_host_prefixed(start_console: ConsoleFactory) -> None:
    with start_console(secure_cookies=True) as console, console.client() as client:
        form = client.get("/login")
        assert list(_set_cookies(form)) == [HOST_PREFIX + CSRF_COOKIE]
        _assert_host_prefixed(form.headers["set-cookie"])
        assert _attributes(form.headers["set-cookie"])["samesite"].lower() == "strict"

        signed_in, token = _log_in(client)
        session_header = _set_cookies(signed_in)[HOST_PREFIX + SESSION_COOKIE]
        _assert_host_prefixed(session_header)
        assert _attributes(session_header)["samesite"].lower() == "lax"
        assert SESSION_COOKIE not in _set_cookies(signed_in)  # no plain name beside it
        jar = {"cookie": f"{HOST_PREFIX}{SESSION_COOKIE}={token}"}
        assert client.get("/api/developer/me", headers=jar).status_code == 200
        assert client.get("/apps", headers=jar).status_code == 200

        apps = client.get("/apps", headers=jar)
        out = client.post("/logout", data={"csrf": csrf_of(apps)},
                          headers={**jar, "origin": console.origin})
        assert out.status_code == 303
        cleared = _set_cookies(out)[HOST_PREFIX + SESSION_COOKIE]
        _assert_host_prefixed(cleared)  # a browser drops it only if it matches the prefix
        assert _attributes(cleared)["max-age"] == "0"


@pytest.mark.usefixtures("developer")
def test_a_plain_named_cookie_is_not_read_when_secure(start_console: ConsoleFactory) -> None:
    """The tossing case: a runtime plants `svc_console` (the attacker's own valid session)
    and `svc_csrf` for the console's host; neither counts."""
    with start_console(secure_cookies=True) as console, console.client() as client:
        _, token = _log_in(client)
        tossed = {"cookie": f"{SESSION_COOKIE}={token}"}
        me = client.get("/api/developer/me", headers=tossed)
        assert (me.status_code, me.json()["code"]) == (401, "developer_auth_required")
        page = client.get("/apps", headers=tossed)
        assert page.status_code == 303 and page.headers["location"] == "/login?next=/apps"
        # Both names at once: the prefixed one is the session, whatever the plain one says.
        both = {"cookie": f"{SESSION_COOKIE}=forged; {HOST_PREFIX}{SESSION_COOKIE}={token}"}
        assert client.get("/api/developer/me", headers=both).status_code == 200

        # A double-submit pair planted under the plain name does not pass the form's check.
        planted = "p" * 43
        refused = client.post("/login", data={"csrf": planted, "login": "dev1",
                                              "password": PASSWORD},
                              headers={"cookie": f"{CSRF_COOKIE}={planted}"})
        assert refused.status_code == 403 and "csrf_failed" in refused.text
        # ...and the form page mints a prefixed token of its own rather than adopting it.
        form = client.get("/login", headers={"cookie": f"{CSRF_COOKIE}={planted}"})
        assert csrf_of(form) != planted and HOST_PREFIX + CSRF_COOKIE in _set_cookies(form)


@pytest.mark.usefixtures("developer")
def test_dev_over_http_keeps_the_plain_names(console: Console) -> None:
    with console.client() as client:
        form = client.get("/login")
        assert list(_set_cookies(form)) == [CSRF_COOKIE]
        assert "secure" not in _attributes(form.headers["set-cookie"])
        assert HOST_PREFIX not in str(client.post(
            "/login", data={"csrf": csrf_of(form), "login": "dev1", "password": PASSWORD}
        ).headers.get_list("set-cookie"))
        assert client.get("/api/developer/me").status_code == 200  # the plain name is read


def _https_urls(port: int, domain: str = "localhost") -> dict[str, Any]:
    return {"bind_port": port, "apps_port": port,
            **{f"{name}_url": f"https://{name}.{domain}:{port}"
               for name in ("portal", "console", "docs")},
            "base_url": f"https://api.{domain}:{port}"}


@pytest.fixture
def secure_portal(start_router: RouterFactory,
                  sessions: sessionmaker[Session]) -> Iterator[Portal]:
    with portal_world(start_router, sessions, **_https_urls(free_port())) as running:
        yield running


def test_the_wallet_cookie_is_host_prefixed_and_only_that_name_is_read(
        secure_portal: Portal) -> None:
    owner: LocalAccount = wallet(5)
    name = HOST_PREFIX + WALLET_COOKIE
    # httpx keeps Secure cookies away from plain http: the cookie goes by hand.
    with writer(secure_portal) as c:
        challenge = c.post("/api/portal/wallet-proof/challenge",
                           json={"address": owner.address}).json()
        proved = c.post("/api/portal/wallet-proof", json={
            "challenge": challenge["challenge"],
            "signature": sign_text(owner, challenge["message"])})
        assert proved.status_code == 200, proved.text
        assert list(_set_cookies(proved)) == [name]
        header = _set_cookies(proved)[name]
        _assert_host_prefixed(header)
        assert "max-age" not in _attributes(header)  # still ends with the browser session
        token = SimpleCookie(header)[name].value

        account = c.get("/api/portal/account", headers={"cookie": f"{name}={token}"})
        assert account.status_code == 200
        assert account.json()["wallet"] == owner.address.lower()
        tossed = c.get("/api/portal/account", headers={"cookie": f"{WALLET_COOKIE}={token}"})
        assert (tossed.status_code, tossed.json()["code"]) == (401, "wallet_proof_required")

        forgotten = c.post("/api/portal/wallet-proof/forget", json={},
                           headers={"cookie": f"{name}={token}",
                                    "x-csrf-token": proved.json()["csrfToken"]})
        assert forgotten.status_code == 200
        _assert_host_prefixed(_set_cookies(forgotten)[name])


# -- real Chromium over TLS -----------------------------------------------------------------

DOMAIN = "example.com"  # on the Public Suffix List's "com": Chromium allows Domain=example.com


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[str, str]:
    authority = trustme.CA()
    issued = authority.issue_cert(f"*.{DOMAIN}", f"*.apps.{DOMAIN}")
    cert, key = tmp_path / "edge.pem", tmp_path / "edge.key"
    issued.private_key_pem.write_to_path(str(key))
    with cert.open("wb") as out:
        for blob in issued.cert_chain_pems:
            out.write(blob.bytes())
    return str(cert), str(key)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_cookie_tossed_from_a_runtime_host_does_not_sign_in_the_console(
        db_url: str, sessions: sessionmaker[Session], tls_files: tuple[str, str]) -> None:
    add_developer(sessions, "dev1", PASSWORD)
    port = free_port()
    # The cluster topology's settings: dev mode, every host on https.
    settings = router_settings(db_url, apps_domain=f"apps.{DOMAIN}", **_https_urls(port, DOMAIN))
    console = f"https://console.{DOMAIN}:{port}"
    runtime = f"https://game.apps.{DOMAIN}:{port}"
    # Chromium's ignore-certificate-errors still counts the page as https (a secure
    # context), which is all Secure and `__Host-` cookies ask of it.
    resolver = f"--host-resolver-rules=MAP *.{DOMAIN} 127.0.0.1"
    with serve_router(create_app(settings), settings, ssl_certfile=tls_files[0],
                      ssl_keyfile=tls_files[1]), chromium(resolver) as browser:
        # The attacker's own session, from an ordinary log-in in a browser of theirs.
        with browser_session(browser, ignore_https_errors=True) as attacker:
            page = attacker.new_page()
            page.goto(f"{console}/login")
            page.fill("input[name=login]", "dev1")
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{console}/apps")
            jar = {c["name"]: c for c in attacker.context.cookies()}
            assert set(jar) == {"__Host-svc_csrf", "__Host-svc_console"}, jar
            assert jar["__Host-svc_console"]["secure"] and jar["__Host-svc_console"]["domain"] == (
                f"console.{DOMAIN}")
            token = jar["__Host-svc_console"]["value"]

        with browser_session(browser, ignore_https_errors=True) as victim:
            page = victim.new_page()
            page.goto(f"{runtime}/")  # any page of the runtime host: its script runs there
            page.evaluate("""token => {
                const tail = "; Domain=example.com; Path=/; Secure; SameSite=Lax";
                document.cookie = "svc_console=" + token + tail;
                document.cookie = "__Host-svc_console=" + token + tail;
                document.cookie = "=__Host-svc_console=" + token + tail;  // nameless
            }""", token)
            planted = victim.context.cookies()
            # The plain name is tossed (the threat is real here); the prefixed forms are not.
            assert [(c["name"], c["domain"]) for c in planted] == [
                ("svc_console", f".{DOMAIN}")], planted

            # The browser sends it to the console (what the console's requests carry)...
            assert [(c["name"], c["value"]) for c in victim.context.cookies(console)] == [
                ("svc_console", token)]
            # ...and the console does not sign the visitor in with it.
            page.goto(f"{console}/apps")
            assert page.url == f"{console}/login?next=/apps", page.url
            me = page.goto(f"{console}/api/developer/me")
            assert me is not None and me.status == 401  # and the developer API on the host
