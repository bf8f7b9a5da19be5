"""Registration, verification, log-in, sessions: the rules, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction, utcnow
from payments.developer import accounts
from payments.developer.models import ConsoleSession, Developer, Membership, Organization
from payments.developer.passwords import Passwords
from payments.developer.sessions import SessionPolicy, load_session, open_session, revoke_session
from payments.errors import ApiError

PASSWORDS = Passwords()
PW = "a long enough password"


def register(sessions: sessionmaker[Session], email: str = "Ada@Example.com",
             username: str = "Ada") -> accounts.IssuedCode:
    with transaction(sessions) as session:
        return accounts.register(session, PASSWORDS, email=email, username=username,
                                 password=PW, now=utcnow())


def test_register_creates_unverified_developer_with_org(sessions: sessionmaker[Session]) -> None:
    issued = register(sessions)
    assert issued.code.isdigit() and len(issued.code) == 6
    with sessions() as session:
        developer = session.scalars(select(Developer)).one()
        assert developer.email == "ada@example.com"
        assert developer.username == "ada"
        assert developer.email_verified_at is None
        assert developer.password_hash.startswith("$argon2id$")
        assert PW not in developer.password_hash
        membership = session.scalars(select(Membership)).one()
        assert session.get(Organization, membership.organization_id) is not None


@pytest.mark.parametrize(("field", "value", "code"), [
    ("email", "not-an-email", "invalid_email"),
    ("username", "x", "invalid_username"),
    ("username", "has space", "invalid_username"),
    ("password", "short", "weak_password"),
    ("password", "aaaaaaaaaaaa", "weak_password"),
])
def test_register_refuses_bad_input(sessions: sessionmaker[Session], field: str, value: str,
                                    code: str) -> None:
    values = {"email": "a@example.com", "username": "alice", "password": PW, field: value}
    with pytest.raises(ApiError) as caught, transaction(sessions) as session:
        accounts.register(session, PASSWORDS, now=utcnow(), **values)
    assert caught.value.code == code


def test_duplicate_email_and_username(sessions: sessionmaker[Session]) -> None:
    register(sessions)
    with pytest.raises(ApiError, match="already exists"):
        register(sessions, email="ADA@example.com", username="other")
    with pytest.raises(ApiError, match="taken"):
        register(sessions, email="new@example.com", username="ADA")


def test_login_requires_verification_then_succeeds(sessions: sessionmaker[Session]) -> None:
    issued = register(sessions)
    with pytest.raises(ApiError) as caught, sessions() as session:
        accounts.authenticate(session, PASSWORDS, login="ada", password=PW)
    assert caught.value.code == "email_not_verified"
    with transaction(sessions) as session:
        accounts.verify_email(session, email="ada@example.com", code=issued.code, now=utcnow())
    with sessions() as session:
        for login in ("ada", "ADA@example.com"):
            assert accounts.authenticate(session, PASSWORDS, login=login, password=PW).username \
                == "ada"
        for login, password in (("ada", "wrong password!"), ("nobody", PW)):
            with pytest.raises(ApiError) as wrong:
                accounts.authenticate(session, PASSWORDS, login=login, password=password)
            assert wrong.value.code == "invalid_credentials"  # same answer either way


def test_wrong_codes_are_counted_and_exhaust_the_code(sessions: sessionmaker[Session]) -> None:
    issued = register(sessions)
    wrong = "000000" if issued.code != "000000" else "111111"

    def attempt() -> ApiError:
        with sessions() as session, session.begin():
            try:
                accounts.verify_email(session, email="ada@example.com", code=wrong, now=utcnow())
            except ApiError as exc:
                session.commit()  # what DeveloperServices.run does for keep_changes errors
                return exc
        raise AssertionError("a wrong code was accepted")

    for _ in range(accounts.MAX_CODE_ATTEMPTS):
        refused = attempt()
        assert refused.code == "verification_code_invalid"
        assert refused.keep_changes
    with pytest.raises(ApiError) as caught, transaction(sessions) as session:
        accounts.verify_email(session, email="ada@example.com", code=issued.code, now=utcnow())
    assert caught.value.code == "verification_code_expired"


def test_resend_limited_to_once_per_minute(sessions: sessionmaker[Session]) -> None:
    register(sessions)
    now = utcnow()
    with pytest.raises(ApiError) as caught, transaction(sessions) as session:
        accounts.resend_code(session, email="ada@example.com", now=now + timedelta(seconds=20))
    assert caught.value.status == 429
    assert 39 <= caught.value.extra["retryAfter"] <= 41
    with transaction(sessions) as session:
        fresh = accounts.resend_code(session, email="ada@example.com",
                                     now=now + timedelta(seconds=61))
    with transaction(sessions) as session:  # the new code works, and only it
        accounts.verify_email(session, email="ada@example.com", code=fresh.code,
                              now=now + timedelta(seconds=62))


def test_code_expires(sessions: sessionmaker[Session]) -> None:
    issued = register(sessions)
    later = utcnow() + accounts.CODE_LIFETIME + timedelta(seconds=1)
    with pytest.raises(ApiError, match="expired"), transaction(sessions) as session:
        accounts.verify_email(session, email="ada@example.com", code=issued.code, now=later)


def test_sessions_idle_absolute_and_revocation(sessions: sessionmaker[Session]) -> None:
    developer_id = register(sessions).developer.id
    policy = SessionPolicy(idle=timedelta(minutes=30), absolute=timedelta(hours=2))
    start = utcnow()
    with transaction(sessions) as session:
        opened = open_session(session, developer_id, start, policy)
    with sessions() as session:
        stored = session.scalars(select(ConsoleSession)).one()
        assert stored.token_hash != opened.token  # only the hash is kept
    step = start
    for _ in range(3):  # activity keeps it alive past the idle limit...
        step += timedelta(minutes=25)
        with transaction(sessions) as session:
            assert load_session(session, opened.token, step, policy) is not None
    with transaction(sessions) as session:  # ...but not past the absolute limit
        assert load_session(session, opened.token, start + timedelta(hours=2, seconds=1),
                            policy) is None
    with transaction(sessions) as session:  # idle too long
        assert load_session(session, opened.token, step + timedelta(minutes=31), policy) is None
    with transaction(sessions) as session:
        revoke_session(session, opened.token, step)
    with transaction(sessions) as session:
        assert load_session(session, opened.token, step, policy) is None
        assert load_session(session, "forged", step, policy) is None
