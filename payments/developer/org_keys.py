"""Organization keys (spec 2.6, "scope of ownership: organization"): one ``zpk_`` key that
may act on every app of its organization (``keyauth.key_may_use``), today's and later ones.

Only a console session manages them. A CLI grant is scoped to one app (spec 5.3), and a
key reaching every app would reach beyond it; a grant gets ``developer_session_required``
whatever its scopes, reads included, so it cannot even learn which organization keys exist.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from payments.developer.auth import Principal
from payments.developer.keys import CreatedKey, create_key
from payments.developer.models import ApiKey
from payments.errors import ApiError

ACTION = "Managing organization API keys"


def owning_organization(who: Principal, requested: str | None) -> str:
    """The organization a new key is for: the one named, or the caller's only one."""
    who.require_session(ACTION)
    if requested is None:
        if len(who.organization_ids) != 1:
            raise ApiError("missing_field", 422, "You belong to several organizations; send "
                           "'organizationId'.", field="organizationId")
        return who.organization_ids[0]
    if requested not in who.organization_ids:
        # Like apps: an organization that is not yours is not found, not forbidden.
        raise ApiError("organization_not_found", 404, f"No organization '{requested}' of "
                       "yours.")
    return requested


def organization_keys(session: Session, who: Principal) -> list[ApiKey]:
    """The organization keys of every organization the caller belongs to, oldest first."""
    who.require_session(ACTION)
    return list(session.scalars(select(ApiKey).where(
        ApiKey.app_id.is_(None), ApiKey.organization_id.in_(who.organization_ids))
        .order_by(ApiKey.created_at)))


def organization_key(session: Session, who: Principal, key_id: str) -> ApiKey:
    who.require_session(ACTION)
    key = session.scalar(select(ApiKey).where(
        ApiKey.id == key_id, ApiKey.app_id.is_(None),
        ApiKey.organization_id.in_(who.organization_ids)))
    if key is None:
        raise ApiError("key_not_found", 404, f"No organization API key '{key_id}'; app keys "
                       "are under /api/developer/apps/<app>/keys.")
    return key


def create_organization_key(session: Session, who: Principal, *, organization_id: str | None,
                            label: str, scopes: list[str] | None, environment: str,
                            now: datetime, form_token: str | None = None,
                            idempotency_key: str | None = None) -> CreatedKey:
    return create_key(session, organization_id=owning_organization(who, organization_id),
                      app_id=None, label=label, scopes=scopes, environment=environment,
                      created_by=who.developer_id, now=now, form_token=form_token,
                      idempotency_key=idempotency_key)
