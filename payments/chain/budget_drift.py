"""Budget drift: the ledger's ``remaining`` against the ERC-20 allowance (spec 2.7).

Users are shown the ledger's ``remaining``, never the allowance. The two should agree once
the charges not yet settled are counted: ``allowance - unsettled == remaining``. Any other
difference (a permit relayed twice, a revoke not relayed, a settlement the ledger does not
know, an expired budget whose allowance lives on) is reported here for operators.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from payments.chain.gateway import ChainGateway
from payments.chain.models import FindingKind
from payments.chain.settlement_states import record_finding
from payments.db import transaction
from payments.ledger.authorizations import remaining
from payments.ledger.models import (
    Authorization,
    AuthorizationStatus,
    Charge,
    RelayStatus,
    SettlementStatus,
)

_UNSETTLED = (SettlementStatus.QUEUED, SettlementStatus.SETTLING, SettlementStatus.FAILED)


@dataclass(frozen=True)
class BudgetDrift:
    authorization_id: str
    owner: str
    status: str
    ledger_remaining: int
    allowance: int
    unsettled: int

    @property
    def drift(self) -> int:
        """What the chain would still let us charge beyond what the ledger would."""
        return max(self.allowance - self.unsettled, 0) - self.ledger_remaining


def budget_drift(sessions: sessionmaker[Session], chain: ChainGateway, now: datetime, *,
                 record: bool = False) -> list[BudgetDrift]:
    """Every relayed active or revoked budget whose allowance disagrees with the ledger."""
    with sessions() as session:
        budgets = list(session.scalars(select(Authorization).where(
            Authorization.spender == chain.params.spender_lower,
            Authorization.relay_status == RelayStatus.RELAYED,
            Authorization.status.in_((AuthorizationStatus.ACTIVE,
                                      AuthorizationStatus.REVOKED)))))
        unsettled = _unsettled_by_owner(session, {b.owner_wallet for b in budgets})
    found = []
    for budget in budgets:
        row = BudgetDrift(budget.id, budget.owner_wallet, budget.status.value,
                          remaining(budget, now), chain.allowance(budget.owner_wallet),
                          unsettled.get(budget.owner_wallet, 0))
        if row.drift != 0:
            found.append(row)
    if record and found:
        with transaction(sessions) as session:
            for row in found:
                record_finding(session, FindingKind.BUDGET_DRIFT, now, detail={
                    "authorizationId": row.authorization_id, "owner": row.owner,
                    "ledgerRemaining": str(row.ledger_remaining),
                    "allowance": str(row.allowance), "unsettled": str(row.unsettled)},
                    key=f"{row.authorization_id}:{row.allowance}:{row.ledger_remaining}")
    return found


def _unsettled_by_owner(session: Session, owners: set[str]) -> dict[str, int]:
    if not owners:
        return {}
    rows = session.execute(
        select(Charge.owner_wallet, func.sum(Charge.amount_atomic))
        .where(Charge.owner_wallet.in_(owners), Charge.settlement_status.in_(_UNSETTLED))
        .group_by(Charge.owner_wallet))
    return {owner: int(total or 0) for owner, total in rows}
