"""Creating an API key under an idempotency key: a retry makes no second key.

The API's other idempotent POSTs (orders, trusted charges, the product route) store their
answer and send it again (``payments.ledger.idempotency``). A create-key answer carries the
secret, which the service never keeps (spec 5.1 item 5); so the key itself holds the
idempotency key, unique per organization, and a retry is answered ``key_already_created``
(409) naming the key by id and masked preview, never with its secret (docs/decisions.md).
The unique constraint, not the lookup, decides between two requests arriving together.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from payments.developer.models import ApiKey
from payments.errors import ApiError
from payments.ledger.idempotency import RETENTION, check_key, fingerprint

FIELD = "idempotencyKey"
HEADER = "Idempotency-Key"  # the same key, for clients that set it as a header


@dataclass(frozen=True)
class KeyRequest:
    """A create-key request's idempotency key and the hash of the key it asks for."""

    key: str
    request_hash: str


def requested_key(body: dict[str, Any], header: str | None) -> str | None:
    """The ``idempotencyKey`` field or the ``Idempotency-Key`` header; both only if equal."""
    field = None if body.get(FIELD) is None else check_key(body[FIELD])
    if header is not None:
        try:
            header = check_key(header)
        except ApiError:
            raise ApiError("invalid_idempotency_key", 422, f"The {HEADER} header must be a "
                           "non-empty key of at most 200 characters.", field=HEADER) from None
        if field is not None and field != header:
            raise ApiError("invalid_idempotency_key", 422, f"'{FIELD}' and the {HEADER} "
                           "header differ; send the key once.", field=FIELD)
    return field if field is not None else header


def key_request(key: str, *, app_id: str | None, label: str, scopes: list[str],
                environment: str) -> KeyRequest:
    """What the key is for, as created: scopes in any order or a label's surrounding
    blanks ask for the same key, so a retry that rebuilt its body still matches."""
    return KeyRequest(key, fingerprint({"appId": app_id, "label": label, "scopes": scopes,
                                        "environment": environment}))


def key_made_under(session: Session, organization_id: str, request: KeyRequest,
                   now: datetime) -> ApiKey | None:
    """The live key this organization created under ``request.key``, if any.

    After :data:`RETENTION` the key lets go of it, so it may be used afresh (as a stored
    answer of the other POSTs expires); a different request under it is refused."""
    made = session.scalar(select(ApiKey).where(ApiKey.organization_id == organization_id,
                                               ApiKey.idempotency_key == request.key))
    if made is None:
        return None
    if made.created_at + RETENTION <= now:
        made.idempotency_key = made.idempotency_request_hash = None
        session.flush()  # before the new key's INSERT meets the unique constraint
        return None
    if made.idempotency_request_hash != request.request_hash:
        raise ApiError("IDEMPOTENCY_KEY_REUSED", 409, f"The {FIELD} '{request.key}' was "
                       "already used to create a different API key (app, label, scopes or "
                       "environment differ); use a new key for a new API key.", field=FIELD)
    return made
