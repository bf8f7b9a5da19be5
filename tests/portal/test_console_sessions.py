"""Console sessions end: log-out revokes server-side; idle and absolute expiry refuse them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction, utcnow
from payments.developer.auth import SESSION_COOKIE
from payments.developer.models import ConsoleSession
from payments.developer.tokens import token_hash
from tests.portal.conftest import CODE_RE, PASSWORD, Console, form_post, log_in


def _refused(console: Console, cookie: str) -> None:
    jar = {"cookie": f"{SESSION_COOKIE}={cookie}"}
    with console.client() as fresh:
        page = fresh.get("/apps", headers=jar)
        assert page.status_code == 303 and page.headers["location"] == "/login?next=/apps"
        me = fresh.get("/api/developer/me", headers=jar)
        assert me.status_code == 401 and me.json()["code"] == "developer_auth_required"


def _fresh_cookie(console: Console) -> str:
    with console.client() as client:
        log_in(client)
        cookie = client.cookies[SESSION_COOKIE]
        assert client.get("/apps").status_code == 200
    return cookie


@pytest.mark.usefixtures("developer")
def test_log_out_revokes_the_session(console: Console, sessions: sessionmaker[Session]) -> None:
    with console.client() as client:
        log_in(client)
        cookie = client.cookies[SESSION_COOKIE]
        out = form_post(client, "/logout", {}, "/apps")
        assert out.status_code == 303 and out.headers["location"] == "/login?signed_out=1"
        assert f'{SESSION_COOKIE}=""' in out.headers["set-cookie"]
        assert "Max-Age=0" in out.headers["set-cookie"]
    with sessions() as session:
        row = session.scalars(select(ConsoleSession).where(
            ConsoleSession.token_hash == token_hash(cookie))).one()
        assert row.revoked_at is not None
    _refused(console, cookie)


@pytest.mark.usefixtures("developer")
def test_log_in_and_verify_end_the_browsers_previous_session(console: Console) -> None:
    """A browser holds one console session: a new log-in, and a verification (which signs
    the new account in), end the one its cookie held rather than leave it live."""
    with console.client() as client:
        log_in(client)
        first = client.cookies[SESSION_COOKIE]
        log_in(client)
        second = client.cookies[SESSION_COOKIE]
        assert second != first
        _refused(console, first)

        email = "ann@example.com"
        signed_up = form_post(client, "/signup", {"email": email, "username": "ann",
                                                  "password": PASSWORD}, "/signup")
        assert signed_up.status_code == 303, signed_up.text
        found = CODE_RE.search(console.smtp.wait_for_message(email).get_content())
        assert found
        verified = form_post(client, "/verify", {"email": email, "code": found.group(1)},
                             "/signup")
        assert verified.status_code == 303 and verified.headers["location"] == "/apps"
        third = client.cookies[SESSION_COOKIE]
        assert third not in (first, second)
        assert "ann" in client.get("/apps").text
    _refused(console, second)


@pytest.mark.usefixtures("developer")
def test_idle_and_absolute_expiry(console: Console, sessions: sessionmaker[Session]) -> None:
    idle = timedelta(seconds=console.settings.console_session_idle_seconds)
    for column, value in (("expires_at", utcnow() - timedelta(seconds=1)),
                          ("last_seen_at", utcnow() - idle - timedelta(minutes=1))):
        cookie = _fresh_cookie(console)
        with transaction(sessions) as session:
            session.execute(update(ConsoleSession)
                            .where(ConsoleSession.token_hash == token_hash(cookie))
                            .values({column: value}))
        _refused(console, cookie)
