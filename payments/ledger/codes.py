"""Summary and payment codes (spec 3.6): random, stored hashed, short-lived, single use."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Delete, bindparam, select, update
from sqlalchemy.orm import Session

from payments.dbapi import Compiled
from payments.developer.tokens import new_token, token_hash
from payments.errors import ApiError
from payments.ledger import idempotency
from payments.ledger.models import AuthCode, CodeKind
from payments.sweeps import BATCH, batch_delete, run_sweep

SUMMARY_PREFIX = "sum_"
PAYMENT_PREFIX = "pay_"


@dataclass(frozen=True)
class IssuedCode:
    code: str
    record: AuthCode


def issue(session: Session, kind: CodeKind, *, ttl: timedelta, now: datetime,
          **binding: object) -> IssuedCode:
    """A new code of ``kind``; first a batch of that kind's dead codes is deleted, so every
    issuer (return code, account handoff, payment-code exchange) sweeps what it adds."""
    run_sweep(session, expired_codes(kind, now))
    code = new_token(SUMMARY_PREFIX if kind == CodeKind.SUMMARY else PAYMENT_PREFIX, 24)
    record = AuthCode(kind=kind, code_hash=token_hash(code), created_at=now,
                      expires_at=now + ttl, **binding)
    session.add(record)
    session.flush()
    return IssuedCode(code, record)


# How long a code's row outlives its expiry. A summary code: a day, so a client back the
# same day is told its code expired (410), not that it is unknown (401). A payment code: as
# long as the answer to the payment it was made for is kept (idempotency.RETENTION, from
# that payment, which is before the code expired), because a retry presenting it again,
# consumed or not, is answered from that stored answer (purchases.replayed reads the code).
RETENTION = {CodeKind.SUMMARY: timedelta(days=1), CodeKind.PAYMENT: idempotency.RETENTION}
SUMMARY_RETENTION = RETENTION[CodeKind.SUMMARY]


def expired_codes(kind: CodeKind, now: datetime, batch: int = BATCH) -> Delete:
    """A batch of codes of ``kind`` expired over their retention ago, which no request can
    use; read through ``ix_auth_codes_kind_expires_at`` (migration 0023). A code that has
    not expired, used or not, is never among them."""
    return batch_delete(AuthCode.id, AuthCode.kind == kind,
                        AuthCode.expires_at <= now - RETENTION[kind], batch=batch)


def find(session: Session, kind: CodeKind, code: str) -> AuthCode | None:
    return session.scalar(select(AuthCode).where(AuthCode.code_hash == token_hash(code),
                                                 AuthCode.kind == kind))


def live_summary(session: Session, code: str, now: datetime) -> AuthCode:
    record = find(session, CodeKind.SUMMARY, code) if code else None
    if record is None:
        raise ApiError("AUTHORIZATION_CODE_INVALID", 401, "Unknown authorization code; refresh "
                       "the handoff or authorize again.")
    if record.expires_at <= now:
        raise ApiError("AUTHORIZATION_CODE_EXPIRED", 410, "The authorization code expired; "
                       "refresh the handoff or authorize again.")
    return record


# Compiled once, run on the driver's cursor (payments.dbapi): every payment's path.
_CONSUME_PAYMENT = Compiled(
    update(AuthCode)
    .where(AuthCode.code_hash == bindparam("digest"), AuthCode.kind == CodeKind.PAYMENT,
           AuthCode.consumed_at.is_(None), AuthCode.expires_at > bindparam("now"))
    .values(consumed_at=bindparam("now"))
    .returning(AuthCode))


def consume_payment_code(session: Session, code: str, now: datetime) -> AuthCode:
    """Mark the payment code used, exactly once across all concurrent callers.

    One conditional UPDATE ... RETURNING on the hot path; the row is read again only to
    say why a code was refused."""
    digest = token_hash(code)
    consumed = _CONSUME_PAYMENT.entity(session, AuthCode, {"digest": digest, "now": now})
    if consumed is not None:
        return consumed
    record = session.scalar(select(AuthCode).where(AuthCode.code_hash == digest,
                                                   AuthCode.kind == CodeKind.PAYMENT))
    if record is None:
        raise ApiError("AUTHORIZATION_CODE_INVALID", 401, "Unknown payment code; exchange the "
                       "summary code for a new one.")
    if record.consumed_at is not None:
        raise ApiError("AUTHORIZATION_CODE_CONSUMED", 409, "This payment code was already "
                       "used. Each payment needs a new one.")
    raise ApiError("AUTHORIZATION_CODE_EXPIRED", 410, "The payment code expired; exchange the "
                   "summary code for a new one.")


def bound_user(given: str | None, bound: str | None, what: str) -> str | None:
    """The developer-side user a payment grants to: the one its payment code or order was
    made for. Naming another is an intent mismatch (spec 7), not a way to redirect the
    grant; naming none takes the bound one."""
    if given is not None and bound is not None and given != bound:
        raise ApiError("AUTHORIZATION_CODE_INTENT_MISMATCH", 409, f"The developerUserId "
                       f"differs from the one this {what} was made for.")
    return given if given is not None else bound
