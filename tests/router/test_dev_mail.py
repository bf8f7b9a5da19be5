"""``svc-server dev`` prints a sign-up's verification code, and that code verifies the account.

The server runs as a real subprocess (as in ``test_dev_mode.py``); its output is read by a
thread while the test drives the console host's real forms over loopback.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from payments.developer.auth import SESSION_COOKIE
from tests.support.dev_server import DevServer
from tests.support.dev_server import dev_server as start_dev_server

EMAIL = "newdev@example.com"
USERNAME = "newdev"
PASSWORD = "correct horse battery"
CSRF_RE = re.compile(r'name="csrf" value="([^"]+)"')


@pytest.fixture
def dev_server(tmp_path: Path) -> Iterator[DevServer]:
    with start_dev_server(tmp_path) as server:
        yield server


def csrf_of(response: httpx.Response) -> str:
    found = CSRF_RE.search(response.text)
    assert found, response.text
    return found.group(1)


def test_dev_prints_the_verification_code_that_verifies_the_account(
        dev_server: DevServer) -> None:
    console = f"console.localhost:{dev_server.port}"
    origin = {"origin": f"http://{console}"}  # what a browser sends with the form
    with httpx.Client(base_url=dev_server.url, headers={"host": console},
                      follow_redirects=False, timeout=15) as client:
        form = client.get("/signup")
        assert form.status_code == 200
        signup = client.post("/signup", headers=origin, data={
            "csrf": csrf_of(form), "email": EMAIL, "username": USERNAME, "password": PASSWORD})
        assert signup.status_code == 303, signup.text
        assert signup.headers["location"].startswith("/verify?email=")

        printed = dev_server.wait_for(re.compile(
            rf"\[dev mail\] to {re.escape(EMAIL)}: [^\n]*\n"
            r"Your verification code is (\d{6})\n"))
        code = printed.group(1)
        assert f"http://{console}/verify?email=" in dev_server.output()  # the link, too

        # Not yet verified: logging in is refused until the code is entered.
        refused = client.post("/login", headers=origin, data={
            "csrf": csrf_of(client.get("/login")), "login": USERNAME, "password": PASSWORD})
        assert refused.status_code == 403 and "email_not_verified" in refused.text

        # Any other code is refused, so a success below is down to the printed one.
        wrong = f"{(int(code) + 1) % 1_000_000:06d}"
        page = client.get(signup.headers["location"])
        bad = client.post("/verify", headers=origin, data={
            "csrf": csrf_of(page), "email": EMAIL, "code": wrong})
        assert bad.status_code == 422 and "verification_code_invalid" in bad.text
        assert SESSION_COOKIE not in bad.cookies

        good = client.post("/verify", headers=origin, data={
            "csrf": csrf_of(page), "email": EMAIL, "code": code})
        assert good.status_code == 303, good.text
        assert good.headers["location"] == "/apps"
        assert good.cookies.get(SESSION_COOKIE)

        apps = client.get("/apps")
        assert apps.status_code == 200
        assert USERNAME in apps.text and "Log out" in apps.text

    with httpx.Client(base_url=dev_server.url, headers={"host": console},
                      follow_redirects=False, timeout=15) as fresh:
        login = fresh.post("/login", headers=origin, data={
            "csrf": csrf_of(fresh.get("/login")), "login": USERNAME, "password": PASSWORD})
        assert login.status_code == 303, login.text
        assert login.headers["location"] == "/apps"
