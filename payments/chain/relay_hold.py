"""A relay that would leave the charges accepted before it short waits for them, a while.

A permit sets the owner's allowance; it does not add to it. A revoke (``Permit(value=0)``),
or a renewal signed for less than the earlier budgets' charges still to settle, relayed
before those charges' batch made them fail on chain (``ERC20InsufficientAllowance``) though
the ledger had accepted them, and optimistic products had delivered: a user could buy and
revoke at once and not pay. The ledger refuses new charges from the revoke (or renewal) on,
as before; its relay now waits until the earlier charges are no longer ``queued`` or
``settling`` (settled, or failed for a reason of their own: a retry then meets the new
allowance), and no longer than ``BatchPolicy.relay_hold`` after the ledger accepted it, so
a stuck settlement cannot keep a revoke off the chain.

The charges looked at belong to budgets signed before the relay (a lower nonce), and no
such budget takes charges any more (only an active one does, and a revoke or renewal ends
it), so their sum can only fall, except that a failed charge's retry puts it back in the
queue: a relay checked at that moment waits for that attempt too, as for a first one.
Read without locks, a claim or a batch being applied meanwhile reads as still waiting; the
read can only err towards waiting.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from payments.ledger.earlier_charges import earlier_amounts, total_reaching
from payments.ledger.models import SettlementStatus

_BEFORE_ATTEMPT = (SettlementStatus.QUEUED, SettlementStatus.SETTLING)


class Hold(enum.Enum):
    CLEAR = "clear"  # nothing accepted before it is left short: send it
    WAIT = "wait"  # earlier charges still wait for their attempt
    OVERDUE = "overdue"  # they still wait, past the hold: send it all the same


@dataclass(frozen=True)
class Lowering:
    """What a relay sets: ``value`` as the allowance of ``owner`` at ``spender``, with its
    ``nonce``; ``accepted_at``, when the ledger took it (the hold counts from there)."""

    owner: str
    spender: str
    nonce: int
    value: int
    accepted_at: datetime


def hold(session: Session, relay: Lowering, now: datetime, limit: timedelta) -> Hold:
    if not charges_left_short(session, relay):
        return Hold.CLEAR
    return Hold.OVERDUE if now - relay.accepted_at >= limit else Hold.WAIT


def charges_left_short(session: Session, relay: Lowering) -> bool:
    """Whether the charges on the owner's earlier budgets still before their settlement
    attempt come to more than the allowance the relay sets."""
    amounts = earlier_amounts(session, relay.owner, relay.spender, relay.nonce,
                              _BEFORE_ATTEMPT)
    return total_reaching(amounts, relay.value + 1) > relay.value
