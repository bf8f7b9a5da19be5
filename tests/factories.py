"""Factories for database objects used across tests."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from payments.db import make_engine, make_sessionmaker, transaction
from payments.models import App, DomainRequestStatus, ListingStatus, RuntimeStatus


def sessions_for(url: str) -> sessionmaker[Session]:
    return make_sessionmaker(make_engine(url))


def add_app(sessions: sessionmaker[Session], slug: str, origin: str | None = None,
            **fields: Any) -> App:
    """An app whose runtime is served (active, approved) unless ``fields`` say otherwise."""
    values: dict[str, Any] = {
        "name": slug.replace("-", " ").title(), "slug": slug, "runtime_origin": origin,
        "runtime_status": RuntimeStatus.ACTIVE if origin else RuntimeStatus.NOT_CONFIGURED,
        "runtime_domain_request_status": DomainRequestStatus.APPROVED,
        "portal_listing_status": ListingStatus.LISTED,
    }
    values.update(fields)
    with transaction(sessions) as session:
        app = App(**values)
        session.add(app)
        session.flush()
        return app


def update_app(sessions: sessionmaker[Session], slug: str, **fields: Any) -> None:
    from sqlalchemy import select
    with transaction(sessions) as session:
        app = session.scalars(select(App).where(App.slug == slug)).one()
        for key, value in fields.items():
            setattr(app, key, value)


def add_developer(sessions: sessionmaker[Session], username: str = "dev1",
                  password: str = "correct horse battery",
                  email: str | None = None) -> tuple[str, str]:
    """A verified developer with an organization; returns (developer_id, organization_id)."""
    from argon2 import PasswordHasher

    from payments.db import utcnow
    from payments.developer.accounts import register, verify_email
    from payments.developer.passwords import Passwords
    email = email or f"{username}@example.com"
    with transaction(sessions) as session:
        # argon2id at its lowest cost: what is tested here is not the hash, and the real
        # hasher verifies it all the same (the parameters are in the hash).
        cheap = Passwords(PasswordHasher(time_cost=1, memory_cost=8, parallelism=1))
        issued = register(session, cheap, email=email, username=username,
                          password=password, now=utcnow())
        verify_email(session, email=email, code=issued.code, now=utcnow())
        from payments.developer.accounts import organization_ids
        return issued.developer.id, organization_ids(session, issued.developer.id)[0]


def add_member(sessions: sessionmaker[Session], organization_id: str, developer_id: str,
               *, name: str | None = None) -> None:
    """Makes the developer a member of another organization, renamed ``name`` if given."""
    from payments.developer.models import Membership, Organization, Role
    with transaction(sessions) as session:
        session.add(Membership(organization_id=organization_id, developer_id=developer_id,
                               role=Role.MEMBER))
        organization = session.get(Organization, organization_id)
        assert organization is not None
        if name is not None:
            organization.name = name


def open_console_session(sessions: sessionmaker[Session], developer_id: str) -> tuple[str, str]:
    """A live console session; returns (cookie token, csrf token)."""
    from payments.db import utcnow
    from payments.developer.sessions import SessionPolicy, open_session
    with transaction(sessions) as session:
        opened = open_session(session, developer_id, utcnow(), SessionPolicy())
        return opened.token, opened.record.csrf_token


def add_owned_app(sessions: sessionmaker[Session], organization_id: str, slug: str,
                  **fields: Any) -> App:
    return add_app(sessions, slug, fields.pop("origin", None), organization_id=organization_id,
                   **fields)
