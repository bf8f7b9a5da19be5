"""CSRF on every console mutation, and a session cookie that stays on the console host."""

from __future__ import annotations

import re
from http.cookies import SimpleCookie

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from payments.developer.auth import SESSION_COOKIE
from tests.factories import add_owned_app
from tests.portal.conftest import PASSWORD, Console, ConsoleFactory, csrf_of, log_in

EVIL = "http://evil.example"


def _session_cookie(response: httpx.Response) -> str:
    headers = [h for h in response.headers.get_list("set-cookie")
               if h.startswith(f"{SESSION_COOKIE}=")]
    assert len(headers) == 1, response.headers
    return headers[0]


@pytest.mark.usefixtures("developer")
def test_mutations_without_the_csrf_token_or_from_another_origin_are_refused(
        console: Console) -> None:
    with console.client() as client:
        # Signed out: the double-submit cookie must match the hidden field.
        client.get("/login")
        refused = client.post("/login", data={"login": "dev1", "password": "x" * 12})
        assert refused.status_code == 403 and "csrf_failed" in refused.text
        forged = client.post("/login", data={"login": "dev1", "password": "x" * 12,
                                             "csrf": "not-the-cookie-value"})
        assert forged.status_code == 403 and "csrf_failed" in forged.text
        token = csrf_of(client.get("/signup"))
        cross = client.post("/signup", data={"csrf": token, "email": "a@example.com",
                                             "username": "aaa", "password": "x" * 12},
                            headers={"origin": EVIL})
        assert cross.status_code == 403 and "csrf_failed" in cross.text

        log_in(client)
        # Signed in: forms need the session's token...
        for path in ("/apps/new", "/logout"):
            bare = client.post(path, data={"name": "Sneaky"})
            assert bare.status_code == 403 and "csrf_failed" in bare.text, path
        session_token = csrf_of(client.get("/apps/new"))
        cross = client.post("/apps/new", data={"csrf": session_token, "name": "Sneaky"},
                            headers={"origin": EVIL})
        assert cross.status_code == 403 and "csrf_failed" in cross.text
        # ...and so does the JSON API on the console host.
        api = client.post("/api/developer/apps", json={"name": "Sneaky"})
        assert api.status_code == 403 and api.json()["code"] == "csrf_failed"
        api = client.post("/api/developer/apps", json={"name": "Sneaky"},
                          headers={"x-csrf-token": session_token, "origin": EVIL})
        assert api.status_code == 403 and api.json()["code"] == "csrf_failed"
        assert client.get("/apps").text.count("Sneaky") == 0

        # The same requests with the token and our own origin go through.
        made = client.post("/apps/new", data={"csrf": session_token, "name": "Real Game"},
                           headers={"origin": console.origin})
        assert made.status_code == 303 and made.headers["location"].startswith("/apps/real-game")
        api = client.post("/api/developer/apps", json={"name": "Via Json"},
                          headers={"x-csrf-token": session_token, "origin": console.origin})
        assert api.status_code == 201, api.text


def _unstamped(page: str) -> str:
    """The page without what differs on every request (CSP nonce, time-stamped CSRF token)."""
    page = re.sub(r'nonce="[^"]+"', 'nonce=""', page)
    return re.sub(r'"csrfToken": "[^"]+"', '"csrfToken": ""', page)


def test_session_cookie_is_host_only_and_refused_on_other_hosts(
        start_console: ConsoleFactory, developer: tuple[str, str],
        sessions: sessionmaker[Session]) -> None:
    add_owned_app(sessions, developer[1], "game", portal_listing_status="listed")
    with start_console() as console, console.client() as client:
        header = _session_cookie(log_in(client))
        cookie = SimpleCookie(header)[SESSION_COOKIE]
        attributes = header.lower()
        assert "domain=" not in attributes
        assert "httponly" in attributes and "samesite=lax" in attributes
        assert cookie["path"] == "/" and "secure" not in attributes  # dev runs on http
        assert client.get("/api/developer/me").status_code == 200  # valid on the console

        jar = {"cookie": f"{SESSION_COOKIE}={cookie.value}"}
        with console.client("api") as api:
            me = api.get("/api/developer/me", headers=jar)
            assert me.status_code == 401 and me.json()["code"] == "developer_auth_required"
        for kind, path in (("portal", "/game"), ("game.apps", "/")):
            with console.client(kind) as other:
                without, with_cookie = other.get(path), other.get(path, headers=jar)
                assert (with_cookie.status_code, _unstamped(with_cookie.text)) == (
                    without.status_code, _unstamped(without.text)), kind

    # Over https (settings' URLs), Secure and `__Host-` named: tests/portal/test_host_cookies.py.
    with start_console(secure_cookies=True) as console, console.client() as client:
        form = client.get("/login")
        csrf_header = form.headers["set-cookie"].lower()
        assert csrf_header.startswith("__host-svc_csrf=") and "domain=" not in csrf_header
        assert all(a in csrf_header for a in ("httponly", "samesite=strict", "secure"))
        token = csrf_of(form)  # httpx keeps Secure cookies from http: send it by hand
        signed_in = client.post("/login", data={"csrf": token, "login": "dev1",
                                                "password": PASSWORD},
                                headers={"cookie": f"__Host-svc_csrf={token}"})
        assert signed_in.status_code == 303
        session = next(h for h in signed_in.headers.get_list("set-cookie")
                       if h.startswith(f"__Host-{SESSION_COOKIE}="))
        assert "; secure" in session.lower()
