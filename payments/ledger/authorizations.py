"""Budgets: creating them from verified permits, reading what remains, revoking."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.orm import Session

from payments.chain.params import ChainParams
from payments.dbapi import Compiled
from payments.errors import ApiError
from payments.ledger.earlier_charges import earlier_amounts, total_reaching
from payments.ledger.models import (
    Authorization,
    AuthorizationStatus,
    Charge,
    RelayStatus,
    SettlementStatus,
)
from payments.ledger.permits import Permit

_UNSETTLED = (SettlementStatus.QUEUED, SettlementStatus.SETTLING, SettlementStatus.FAILED)


def remaining(authorization: Authorization, now: datetime) -> int:
    """What the user can still spend: 0 unless active and unexpired; never negative."""
    if authorization.status != AuthorizationStatus.ACTIVE or authorization.deadline <= now:
        return 0
    return max(authorization.value_atomic - authorization.spent_atomic, 0)


def active_authorization(session: Session, owner: str, spender: str) -> Authorization | None:
    return session.scalar(select(Authorization).where(
        Authorization.owner_wallet == owner.lower(), Authorization.spender == spender.lower(),
        Authorization.status == AuthorizationStatus.ACTIVE))


def locked_active_authorization(session: Session, owner: str,
                                spender: str) -> Authorization | None:
    """The wallet's active budget, its row locked until commit, for a change of its status.

    Unlocked, a revoke read budget A, waited for A's row behind a renewal (which supersedes
    A with B, holding that lock), and then revoked A: B stayed active while the revoke's
    ``Permit(value=0)`` went to the chain. Under the lock, PostgreSQL finds A superseded and
    returns nothing (B is newer than the statement), so it looks once more and finds B."""
    query = select(Authorization).where(
        Authorization.owner_wallet == owner.lower(), Authorization.spender == spender.lower(),
        Authorization.status == AuthorizationStatus.ACTIVE,
    ).with_for_update().execution_options(populate_existing=True)
    return session.scalar(query) or session.scalar(query)


def recorded_nonce_limit(session: Session, owner: str) -> int:
    """One past every permit nonce the ledger recorded for ``owner``, budgets and revokes
    (the token's nonces are per owner, across spenders), except those whose relay failed:
    the token never used those, so its next permit must be able to carry them again."""
    owner = owner.lower()
    signed = session.scalar(select(func.max(Authorization.nonce)).where(
        Authorization.owner_wallet == owner,
        Authorization.relay_status != RelayStatus.FAILED))
    revoked = session.scalar(select(func.max(Authorization.revoke_nonce)).where(
        Authorization.owner_wallet == owner,
        Authorization.revoke_relay_status != RelayStatus.FAILED))
    return max((n + 1 for n in (signed, revoked) if n is not None), default=0)


def authorize_permit(session: Session, params: ChainParams, permit: Permit,
                     now: datetime) -> Authorization:
    """Record a verified permit as the wallet's budget, replacing any earlier one.

    A permit proves the wallet's consent once, when it is recorded. After the relayer sends
    it, its fields and signature are public on chain; were the same permit accepted again,
    anyone could present it to get a summary code, for any app, on the user's budget. So a
    permit must carry a nonce past every one recorded for the wallet; the wallet's current
    budget is reached again only through an owner proof, which is bound to one app and
    return URL. The one-active-budget index makes this hold under concurrency: of two calls
    with the same permit, the second to insert fails and, run again, finds it recorded.

    A new permit sets the ERC-20 allowance to its value (it does not add), and charges
    of the old budget that have not settled yet will draw on that same allowance, so
    they count against the new budget from the start.
    """
    if permit.deadline_at <= now:
        raise ApiError("permit_expired", 422, "The permit's deadline has passed; sign a new "
                       "one.")
    if permit.value <= 0:
        raise ApiError("invalid_permit", 422, "A budget permit needs a value above zero; "
                       "revoking is a separate operation.")
    previous = session.scalar(select(Authorization).where(
        Authorization.owner_wallet == permit.owner, Authorization.spender == params.spender_lower,
        Authorization.status == AuthorizationStatus.ACTIVE).with_for_update())
    # Read in this order, a concurrent first use that commits between the two reads still
    # reads as "already used": whatever the first read saw, the second sees too. The
    # signature is one encoding per signature (parse_permit, verify_permit), so the same
    # permit is found, also one whose relay failed (left out of the nonce limit).
    stale = permit.nonce < recorded_nonce_limit(session, permit.owner)
    if session.scalar(select(Authorization.id).where(
            Authorization.owner_wallet == permit.owner,
            Authorization.signature == permit.signature).limit(1)) is not None:
        raise ApiError("permit_already_used", 409, "This permit has already been recorded "
                       "as the wallet's budget and cannot be used again. To continue with "
                       "that budget, confirm the wallet with the gas-free check; to change "
                       "it, sign a new permit.")
    if stale:
        raise ApiError("permit_nonce_stale", 409, "This permit's nonce is not newer than "
                       "the wallet's last recorded permit; sign a fresh permit.")
    carried = 0
    if previous is not None:
        carried = unsettled_amount(session, previous.id)
        previous.status = AuthorizationStatus.SUPERSEDED
        session.flush()  # free the one-active-budget slot before inserting
    authorization = Authorization(
        owner_wallet=permit.owner, spender=params.spender_lower, token=params.token.lower(),
        chain_id=params.chain_id, value_atomic=permit.value, spent_atomic=carried,
        deadline=permit.deadline_at, nonce=permit.nonce, signature=permit.signature,
        status=AuthorizationStatus.ACTIVE, relay_status=RelayStatus.PENDING, created_at=now)
    session.add(authorization)
    session.flush()
    return authorization


def recount_carried(session: Session, authorization: Authorization) -> None:
    """Before a renewal's permit is first sent: count as spent only the earlier charges that
    can still draw on the allowance it sets.

    At the renewal, the earlier budget's unsettled charges were counted against the new
    one (:func:`authorize_permit`): they would settle against the allowance the permit
    sets. Those settled since, before the permit was sent (a relay that would leave them
    short waits for them: payments/chain/relay_hold.py), were paid from the earlier
    allowance; still counted, the budget's ``remaining`` would stay below its allowance for
    good. Only ever lowers ``spent_atomic``. The caller holds the row's lock, so no
    reservation lands between reading its charges and writing what is spent."""
    own = session.scalar(select(func.coalesce(func.sum(Charge.amount_atomic), 0)).where(
        Charge.authorization_id == authorization.id))
    own = int(own or 0)
    carried = authorization.spent_atomic - own
    if carried <= 0:
        return
    earlier = earlier_amounts(session, authorization.owner_wallet, authorization.spender,
                              authorization.nonce, _UNSETTLED)
    still = total_reaching(earlier, carried)
    if still >= carried:
        return
    authorization.spent_atomic = own + still


def unsettled_amount(session: Session, authorization_id: str) -> int:
    total = session.scalar(select(func.coalesce(func.sum(Charge.amount_atomic), 0)).where(
        Charge.authorization_id == authorization_id,
        Charge.settlement_status.in_(_UNSETTLED)))
    return int(total or 0)


# Compiled once, run on the driver's cursor (payments.dbapi): every payment's path.
_BY_ID = Compiled(select(Authorization).where(Authorization.id == bindparam("id")))
_RESERVE = Compiled(
    update(Authorization)
    .where(Authorization.id == bindparam("authorization_id"),
           Authorization.status == AuthorizationStatus.ACTIVE,
           Authorization.deadline > bindparam("now"),
           # Not ``spent + amount <= value``: both may be up to 2**63 - 1, and their sum
           # past BIGINT is an error on PostgreSQL (SQLite turns it into a float). ``value
           # - amount`` stays in range, and the SET below runs only where it is covered.
           Authorization.spent_atomic <= Authorization.value_atomic - bindparam("amount"))
    .values(spent_atomic=Authorization.spent_atomic + bindparam("amount"))
    .returning(Authorization.spent_atomic))


def current_authorization(session: Session, authorization_id: str) -> Authorization:
    """The budget row as it is now, read-only (a detached copy, see payments.dbapi)."""
    authorization = _BY_ID.entity(session, Authorization, {"id": authorization_id})
    if authorization is None:
        raise LookupError(f"authorization {authorization_id} does not exist")
    return authorization


def reserve(session: Session, authorization_id: str, amount: int,
            now: datetime) -> int | None:
    """Take ``amount`` from the budget if, and only if, it is active and covers it; return
    what is now spent, or None.

    One conditional UPDATE: the database serializes concurrent reservations on the row,
    so the sum of reservations can never exceed the permit value.
    """
    spent = _RESERVE.scalar(session, {"authorization_id": authorization_id, "amount": amount,
                                      "now": now})
    return None if spent is None else int(spent)


def refusal(authorization: Authorization, amount: int, now: datetime) -> ApiError:
    """Why a reservation failed, for the client (spec 3.6: expired, revoked, low)."""
    if authorization.status == AuthorizationStatus.REVOKED:
        return ApiError("AUTHORIZATION_REVOKED", 402, "The user revoked this budget; renew it "
                        "in the portal.", budgetState="budget_revoked")
    if authorization.status != AuthorizationStatus.ACTIVE or authorization.deadline <= now:
        return ApiError("AUTHORIZATION_EXPIRED", 402, "The budget has expired; renew it in the "
                        "portal.", budgetState="budget_expired")
    return ApiError("INSUFFICIENT_BUDGET", 402, f"The remaining budget "
                    f"({remaining(authorization, now)}) does not cover {amount}; renew it in "
                    "the portal.", budgetState="needs_budget",
                    remaining=str(remaining(authorization, now)))


def revoke(authorization: Authorization, now: datetime) -> None:
    """The ledger side of ``Permit(value=0)``; the relayer sends the permit (chain issue)."""
    authorization.status = AuthorizationStatus.REVOKED
    authorization.revoked_at = now
