"""Registration, email verification and log-in of developers (spec 5.2)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from payments.developer.models import (
    Developer,
    EmailVerification,
    Membership,
    Organization,
    Role,
)
from payments.developer.passwords import Passwords
from payments.developer.tokens import code_hash, same, verification_code
from payments.errors import ApiError

EMAIL_RE = re.compile(r"^[^@\s]{1,64}@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+\Z")
USERNAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{2,39}\Z")
CODE_LIFETIME = timedelta(minutes=15)
RESEND_COOLDOWN = timedelta(seconds=60)
MAX_CODE_ATTEMPTS = 5


@dataclass(frozen=True)
class IssuedCode:
    developer: Developer
    code: str


def normalize_email(email: str) -> str:
    email = email.strip().lower()
    if len(email) > 254 or not EMAIL_RE.match(email):
        raise ApiError("invalid_email", 422, "Enter a valid email address.")
    return email


def normalize_username(username: str) -> str:
    username = username.strip().lower()
    if not USERNAME_RE.match(username):
        raise ApiError("invalid_username", 422, "Usernames are 3-40 characters: lower-case "
                       "letters, digits, '-' and '_', starting with a letter or digit.")
    return username


def register(session: Session, passwords: Passwords, *, email: str, username: str,
             password: str, now: datetime) -> IssuedCode:
    """Create an unverified developer with a one-member organization and a code to mail."""
    email, username = normalize_email(email), normalize_username(username)
    password_hash = passwords.hash(password)
    if session.scalar(select(Developer.id).where(Developer.email == email)):
        raise ApiError("email_taken", 409, "An account with this email already exists; "
                       "log in instead.")
    if session.scalar(select(Developer.id).where(Developer.username == username)):
        raise ApiError("username_taken", 409, f"The username '{username}' is taken.")
    developer = Developer(email=email, username=username, password_hash=password_hash)
    organization = Organization(name=username)
    session.add_all([developer, organization])
    try:
        session.flush()
    except IntegrityError:  # a concurrent sign-up took the email or username
        raise ApiError("account_taken", 409, "That email or username was just taken.") from None
    session.add(Membership(organization_id=organization.id, developer_id=developer.id,
                           role=Role.OWNER))
    return IssuedCode(developer, _new_code(session, developer, now))


def _new_code(session: Session, developer: Developer, now: datetime) -> str:
    code = verification_code()
    row = session.get(EmailVerification, developer.id)
    if row is None:
        row = EmailVerification(developer_id=developer.id)
        session.add(row)
    row.code_hash = code_hash(developer.id, code)
    row.expires_at = now + CODE_LIFETIME
    row.last_sent_at = now
    row.failed_attempts = 0
    return code


def resend_code(session: Session, *, email: str, now: datetime) -> IssuedCode:
    """A fresh code, at most once per 60 seconds per account (enforced here, server-side)."""
    developer = _developer_by_email(session, email)
    if developer.email_verified_at is not None:
        raise ApiError("already_verified", 409, "This email address is already verified; "
                       "log in.")
    row = session.get(EmailVerification, developer.id, with_for_update=True)
    if row is not None:
        wait = (row.last_sent_at + RESEND_COOLDOWN - now).total_seconds()
        if wait > 0:
            seconds = int(wait) + (wait % 1 > 0)
            raise ApiError("rate_limited", 429, f"A code was sent less than a minute ago; "
                           f"you can ask for another in {seconds} s.", retryAfter=seconds)
    return IssuedCode(developer, _new_code(session, developer, now))


def verify_email(session: Session, *, email: str, code: str, now: datetime) -> Developer:
    developer = _developer_by_email(session, email)
    if developer.email_verified_at is not None:
        # Nothing to prove any more, and answering with the account would let a code-less
        # request pass for a verification.
        raise ApiError("already_verified", 409, "This email address is already verified; "
                       "log in instead.")
    row = session.get(EmailVerification, developer.id, with_for_update=True)
    if row is None or row.expires_at < now or row.failed_attempts >= MAX_CODE_ATTEMPTS:
        raise ApiError("verification_code_expired", 410, "This code has expired or was tried "
                       "too often; ask for a new one.")
    if not same(row.code_hash, code_hash(developer.id, code.strip())):
        row.failed_attempts += 1
        raise ApiError("verification_code_invalid", 422, "That code is not right; check the "
                       "latest email we sent.", keep_changes=True)
    developer.email_verified_at = now
    session.delete(row)
    return developer


def authenticate(session: Session, passwords: Passwords, *, login: str,
                 password: str) -> Developer:
    """The developer for an email-or-username and password, or one generic error."""
    name = login.strip().lower()
    developer = session.scalar(select(Developer).where(
        or_(Developer.email == name, Developer.username == name)))
    if not passwords.verify(developer.password_hash if developer else None, password):
        raise ApiError("invalid_credentials", 401, "Wrong email/username or password.")
    assert developer is not None
    if developer.email_verified_at is None:
        raise ApiError("email_not_verified", 403, "Verify your email address first; we sent "
                       "you a code.", email=developer.email)
    return developer


def organization_ids(session: Session, developer_id: str) -> list[str]:
    return list(session.scalars(select(Membership.organization_id)
                                .where(Membership.developer_id == developer_id)))


def _developer_by_email(session: Session, email: str) -> Developer:
    developer = session.scalar(select(Developer).where(
        func.lower(Developer.email) == email.strip().lower()))
    if developer is None:
        raise ApiError("account_not_found", 404, "No account uses this email address.")
    return developer

