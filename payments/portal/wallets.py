"""What the portal shows and signs for one wallet: its budget and its next permit nonce.

The budget is the ledger's (``remaining`` = value - spent of the active, unexpired
authorization), never the ERC-20 allowance (spec 2.7).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from payments.ledger.authorizations import recorded_nonce_limit, remaining
from payments.ledger.models import Authorization, AuthorizationStatus


@dataclass(frozen=True)
class BudgetView:
    authorization_id: str
    state: str  # "active" | "needs_budget" | "budget_expired" | "budget_revoked"
    value: int
    remaining: int
    spender: str
    expires_at: datetime
    revoked_at: datetime | None

    def to_json(self) -> dict[str, Any]:
        return {"authorizationId": self.authorization_id, "state": self.state,
                "valueAtomic": str(self.value), "remaining": str(self.remaining),
                "spender": self.spender, "expiresAt": self.expires_at.isoformat(),
                "revokedAt": self.revoked_at.isoformat() if self.revoked_at else None}


def budget_state(authorization: Authorization, now: datetime) -> str:
    """The runtime budget states of spec 3.6: revoked, expired, low/missing, or active."""
    if authorization.status == AuthorizationStatus.REVOKED:
        return "budget_revoked"
    if authorization.status != AuthorizationStatus.ACTIVE or authorization.deadline <= now:
        return "budget_expired"
    return "active" if remaining(authorization, now) > 0 else "needs_budget"


def current_budget(session: Session, owner: str, spender: str,
                   now: datetime) -> BudgetView | None:
    """The wallet's latest budget for ``spender``: the active one, else the newest revoked
    or expired one (so the page can say *why* there is nothing to spend); superseded
    budgets are history only."""
    rows = session.scalars(select(Authorization).where(
        Authorization.owner_wallet == owner.lower(), Authorization.spender == spender.lower(),
        Authorization.status != AuthorizationStatus.SUPERSEDED)
        .order_by(Authorization.created_at.desc()).limit(5)).all()
    if not rows:
        return None
    active = [a for a in rows if a.status == AuthorizationStatus.ACTIVE]
    chosen = active[0] if active else rows[0]
    return BudgetView(chosen.id, budget_state(chosen, now), chosen.value_atomic,
                      remaining(chosen, now), chosen.spender, chosen.deadline,
                      chosen.revoked_at)


def next_permit_nonce(session: Session, owner: str, chain_nonce: int | None) -> int:
    """The nonce the wallet's next permit must carry.

    The token's ``nonces(owner)`` only moves when the relayer sends a permit, so a budget
    or revoke signed but not relayed yet still holds the next value: take whichever is
    higher, the chain's or ``recorded_nonce_limit``: one past every nonce the ledger has
    recorded for the wallet but those whose relay failed (the relayer sends them in nonce
    order; the ledger refuses any lower one).
    """
    return max(recorded_nonce_limit(session, owner), chain_nonce or 0)
