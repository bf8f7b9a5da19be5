"""Backend API keys (spec 5.1, 2.6): ``zpk_`` secrets shown once, kept only as hashes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from payments.developer.key_idempotency import (
    KeyRequest,
    key_made_under,
    key_request,
    requested_key,
)
from payments.developer.models import ApiKey
from payments.developer.tokens import new_token, token_hash
from payments.developer.views import key_view
from payments.errors import ApiError
from payments.http import field_str, field_str_list
from payments.ids import IdPrefix

DEFAULT_KEY_SCOPES = ("orders:create", "orders:read", "receipts:read", "deliveries:read")
EXTRA_KEY_SCOPES = ("charges:create", "connections:create", "connections:read")
KEY_SCOPES = DEFAULT_KEY_SCOPES + EXTRA_KEY_SCOPES
ENVIRONMENTS = ("test", "live")


@dataclass(frozen=True)
class CreatedKey:
    secret: str  # returned once, never stored
    key: ApiKey


FORM_MADE = ("This form already created its API key; its secret was shown once, then, and "
             "is not shown again. No other key was created.")


class KeyAlreadyCreated(ApiError):
    """The one-time form token, or the idempotency key, made ``key`` already. The answer
    names the key (``keyId``, ``key`` with its masked preview), never its secret."""

    def __init__(self, key: ApiKey, message: str = FORM_MADE) -> None:
        super().__init__("key_already_created", 409, message, keyId=key.id, key=key_view(key))
        self.key = key

    @classmethod
    def under(cls, key: ApiKey, idempotency_key: str) -> KeyAlreadyCreated:
        return cls(key, f"The API key {key.id} ({key.preview}) was already created under "
                   f"idempotencyKey '{idempotency_key}'; its secret was shown once, in the "
                   "answer to that first request, and is not shown again. No other key was "
                   "created. If that answer was lost, revoke this key and create a new one "
                   "under a new idempotency key.")


@dataclass(frozen=True)
class NewKeyFields:
    label: str
    scopes: list[str] | None
    environment: str
    idempotency_key: str | None


def new_key_fields(body: dict[str, Any], idempotency_header: str | None = None) -> NewKeyFields:
    """A create-key request, app or organization key alike: label, scopes, environment and
    the optional idempotency key (the body's ``idempotencyKey`` or the header's)."""
    label = field_str(body, "label", required=False, max_length=120, default="")
    scopes = field_str_list(body, "scopes")
    environment = field_str(body, "environment", required=False, default="test")
    return NewKeyFields(label or "", scopes, environment or "test",
                        requested_key(body, idempotency_header))


def key_changes(body: dict[str, Any]) -> tuple[str | None, list[str] | None]:
    """A change-key body: the new label and/or scopes; at least one of them."""
    label = field_str(body, "label", required=False, max_length=120)
    scopes = field_str_list(body, "scopes")
    if label is None and scopes is None:
        raise ApiError("missing_field", 422, "Send 'label' and/or 'scopes' to change.")
    return label, scopes


def mask(secret: str) -> str:
    """``zpk_test_…`` preview: the environment and the last four characters only."""
    head, _, body = secret.partition("_")
    environment, _, rest = body.partition("_")
    return f"{head}_{environment}_…{rest[-4:]}"


def check_key_scopes(scopes: list[str] | None) -> list[str]:
    if scopes is None:
        return list(DEFAULT_KEY_SCOPES)
    unknown = [s for s in scopes if s not in KEY_SCOPES]
    if unknown:
        raise ApiError("invalid_scope", 422, f"Unknown API key scope(s): {', '.join(unknown)}. "
                       f"Keys can hold: {', '.join(KEY_SCOPES)}.", scopes=unknown)
    if not scopes:
        raise ApiError("invalid_scope", 422, "New keys need explicit scopes; empty scope lists "
                       "exist only on legacy keys.")
    return sorted(set(scopes), key=KEY_SCOPES.index)


def create_key(session: Session, *, organization_id: str, app_id: str | None, label: str,
               scopes: list[str] | None, environment: str, created_by: str | None,
               now: datetime, form_token: str | None = None,
               idempotency_key: str | None = None) -> CreatedKey:
    """A new key and its secret. ``form_token``: the one-time token of the console form
    asking for it; a token that made a key already raises :class:`KeyAlreadyCreated`
    instead of making a second one (a reload of the page that showed the secret).
    ``idempotency_key``: the API caller's, the same way per organization for 30 days
    (``payments.developer.key_idempotency``)."""
    if environment not in ENVIRONMENTS:
        raise ApiError("invalid_environment", 422, "environment must be 'test' or 'live'.")
    label = label.strip()
    if len(label) > 120:
        raise ApiError("invalid_label", 422, "Labels are at most 120 characters.")
    scopes = check_key_scopes(scopes)
    once = None if form_token is None else token_hash(form_token)
    retry = None if idempotency_key is None else key_request(
        idempotency_key, app_id=app_id, label=label, scopes=scopes, environment=environment)
    _refuse_used(session, once)
    _refuse_retried(session, organization_id, retry, now)
    secret = new_token(f"{IdPrefix.API_KEY.value}{environment}_", 24)
    key = ApiKey(organization_id=organization_id, app_id=app_id, label=label,
                 environment=environment, scopes=scopes, secret_hash=token_hash(secret),
                 preview=mask(secret), created_by=created_by, created_at=now,
                 form_token_hash=once, idempotency_key=None if retry is None else retry.key,
                 idempotency_request_hash=None if retry is None else retry.request_hash)
    try:
        with session.begin_nested():  # a lost race leaves the transaction usable
            session.add(key)
            session.flush()
    except IntegrityError:
        # The unique token or idempotency key decides a race the checks above could not
        # see (PostgreSQL: the other request committed in between); that request's key is
        # the one made.
        _refuse_used(session, once)
        _refuse_retried(session, organization_id, retry, now)
        raise
    return CreatedKey(secret, key)


def _refuse_used(session: Session, once: str | None) -> None:
    if once is None:
        return
    made = session.scalar(select(ApiKey).where(ApiKey.form_token_hash == once))
    if made is not None:
        raise KeyAlreadyCreated(made)


def _refuse_retried(session: Session, organization_id: str, retry: KeyRequest | None,
                    now: datetime) -> None:
    if retry is None:
        return
    made = key_made_under(session, organization_id, retry, now)
    if made is not None:
        raise KeyAlreadyCreated.under(made, retry.key)


def key_for_secret(session: Session, secret: str | None) -> ApiKey:
    if not secret or not secret.startswith(IdPrefix.API_KEY.value):
        raise ApiError("valid_api_key_required", 401, "Send a valid zpk_ key as "
                       "'Authorization: Bearer <key>' or 'x-svc-secret-key'.")
    key = session.scalar(select(ApiKey).where(ApiKey.secret_hash == token_hash(secret)))
    if key is None or key.revoked_at is not None:
        raise ApiError("valid_api_key_required", 401, "This API key is not valid or was "
                       "revoked.")
    return key


def require_key_scope(key: ApiKey, scope: str) -> None:
    # Legacy keys with an empty scope list keep working during migration (spec 5.1 item 3).
    if key.scopes and scope not in key.scopes:
        raise ApiError("api_key_scope_missing", 403, f"This API key lacks the scope '{scope}'.",
                       scope=scope)


def update_key(key: ApiKey, *, label: str | None, scopes: list[str] | None) -> None:
    """Change what a key is called and what it may do; its secret stays the same."""
    if key.revoked_at is not None:
        raise ApiError("key_revoked", 409, "This API key is revoked; create a new one.")
    if label is not None:
        label = label.strip()
        if len(label) > 120:
            raise ApiError("invalid_label", 422, "Labels are at most 120 characters.")
        key.label = label
    if scopes is not None:
        # An explicit list is required here too: emptying it would make a legacy key.
        key.scopes = check_key_scopes(scopes)


def revoke_key(key: ApiKey, now: datetime) -> None:
    if key.revoked_at is None:
        key.revoked_at = now
