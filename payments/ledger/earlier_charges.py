"""The charges on an owner's budgets signed before a given one, and their sum up to a bound.

A permit sets the owner's allowance at the spender; the budgets signed before it (a lower
nonce) may still have charges to settle against that allowance. Both the relay's hold
(payments/chain/relay_hold.py) and a renewal's recount (payments/ledger/authorizations.py)
ask how much of them is left, each for its own settlement states.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from payments.ledger.models import Authorization, Charge, SettlementStatus


def earlier_amounts(session: Session, owner: str, spender: str, nonce: int,
                    states: Sequence[SettlementStatus]) -> Iterable[int]:
    """The amounts of the charges in ``states`` on ``owner``'s budgets at ``spender`` with a
    nonce below ``nonce``."""
    return session.scalars(
        select(Charge.amount_atomic)
        .join(Authorization, Authorization.id == Charge.authorization_id)
        .where(Authorization.owner_wallet == owner,
               Authorization.spender == spender,
               Authorization.nonce < nonce,
               Charge.settlement_status.in_(states)))


def total_reaching(amounts: Iterable[int], bound: int) -> int:
    """The sum of ``amounts``, stopped as soon as it reaches ``bound``. Added up here, not by
    the database: a sum over several budgets may pass BIGINT (SQLite raises on that), and
    the first rows usually decide."""
    total = 0
    for amount in amounts:
        total += amount
        if total >= bound:
            break
    return total
