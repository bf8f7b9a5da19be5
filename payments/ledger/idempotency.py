"""Idempotency keys: the same key and request answer the same; a different request, an error.

Records are kept 30 days (``RETENTION``); after that a key may be used afresh.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Table, bindparam, delete, insert, select
from sqlalchemy.orm import Session

from payments.dbapi import Compiled
from payments.errors import ApiError
from payments.ledger.models import IdempotencyRecord

RETENTION = timedelta(days=30)
# Compiled once, run on the driver's cursor (payments.dbapi): every payment's path.
_RECORDS = cast(Table, IdempotencyRecord.__table__)
_FIND = Compiled(select(IdempotencyRecord).where(
    IdempotencyRecord.app_id == bindparam("app_id"), IdempotencyRecord.scope == bindparam("scope"),
    IdempotencyRecord.key == bindparam("key")))
_EXPIRE = Compiled(delete(IdempotencyRecord).where(IdempotencyRecord.id == bindparam("id")))
_INSERT = Compiled.insert(_RECORDS, insert(_RECORDS))
MAX_KEY_LENGTH = 200


@dataclass(frozen=True)
class Stored:
    status: int
    body: dict[str, Any]


def check_key(key: Any) -> str:
    # NUL: PostgreSQL text cannot store it (and no sane key carries one).
    if (not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY_LENGTH
            or "\x00" in key):
        raise ApiError("invalid_idempotency_key", 422, "'idempotencyKey' must be a non-empty "
                       f"string of at most {MAX_KEY_LENGTH} characters.", field="idempotencyKey")
    return key


def fingerprint(request: dict[str, Any]) -> str:
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def replay(session: Session, app_id: str, scope: str, key: str, request_hash: str,
           now: datetime) -> Stored | None:
    record = find(session, app_id, scope, key, now)
    return None if record is None else answer(record, request_hash)


def find(session: Session, app_id: str, scope: str, key: str,
         now: datetime) -> IdempotencyRecord | None:
    """The live record of ``key``, whatever request it was for (an expired one is dropped).

    For a caller that can fingerprint its request only after reading more (the product
    route compares what the payment code binds, docs/payments.md)."""
    record = _FIND.entity(session, IdempotencyRecord,
                          {"app_id": app_id, "scope": scope, "key": key})
    if record is None:
        return None
    if record.expires_at <= now:
        _EXPIRE.run(session, {"id": record.id})
        return None
    return record


def answer(record: IdempotencyRecord, request_hash: str) -> Stored:
    """The stored answer, if ``request_hash`` is the request it was stored for."""
    if record.request_hash != request_hash:
        raise ApiError("IDEMPOTENCY_KEY_REUSED", 409, "This idempotencyKey was already used "
                       "with a different request; use a new key for a new purchase.")
    return Stored(record.response_status, record.response_body)


def remember(session: Session, app_id: str, scope: str, key: str, request_hash: str,
             status: int, body: dict[str, Any], now: datetime) -> None:
    # Not session.add: one INSERT without a unit-of-work flush (the payment hot path).
    _INSERT.run(session, {
        "app_id": app_id, "scope": scope, "key": key, "request_hash": request_hash,
        "response_status": status, "response_body": body, "created_at": now,
        "expires_at": now + RETENTION})
