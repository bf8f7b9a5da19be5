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
