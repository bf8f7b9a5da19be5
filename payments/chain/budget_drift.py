"""Budget drift: the ledger's ``remaining`` against the ERC-20 allowance (spec 2.7).

Users are shown the ledger's ``remaining``, never the allowance. The two should agree once
the charges not yet settled are counted: ``allowance - unsettled == remaining``. Any other
difference (a permit relayed twice, a revoke not relayed, a settlement the ledger does not
know, an expired budget whose allowance lives on) is reported here for operators.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy.orm import Session, sessionmaker

from payments.chain.cursors import locked_cursor
from payments.chain.gateway import ChainGateway
from payments.chain.models import ChainCursor, FindingKind
from payments.chain.settlement_states import record_finding
from payments.db import transaction, utcnow
from payments.ledger.authorizations import remaining
from payments.ledger.models import (
    Authorization,
    AuthorizationStatus,
    Charge,
    RelayStatus,
    SettlementStatus,
)

CURSOR = "budget_drift"
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
                 record: bool = False, settled_only: bool = False,
                 only: Collection[str] | None = None) -> list[BudgetDrift]:
    """Every relayed active or revoked budget whose allowance disagrees with the ledger.

    ``settled_only`` (the chain worker's periodic check) leaves out what a transaction in
    flight explains: the owners with a charge settling or a relay pending (their allowance
    may already have moved, the ledger not yet), budgets past their deadline (the allowance
    of an expired budget lives on until revoked, by design), and any whose ledger figures
    changed while their allowance was being read. ``only``: these budgets' ids.
    """
    budgets, unsettled, busy = _ledger(sessions, chain, now, only)
    found = []
    for budget_id, owner, status, left, expired in budgets:
        if settled_only and (owner in busy or expired):
            continue
        row = BudgetDrift(budget_id, owner, status, left, chain.allowance(owner),
                          unsettled.get(owner, 0))
        if row.drift != 0:
            found.append(row)
    if settled_only and found:
        again, unsettled, busy = _ledger(sessions, chain, now, only)
        still = {b.id: (b.remaining, unsettled.get(b.owner, 0)) for b in again
                 if b.owner not in busy}
        found = [row for row in found
                 if still.get(row.authorization_id) == (row.ledger_remaining, row.unsettled)]
    if record and found:
        with transaction(sessions) as session:
            for row in found:
                record_finding(session, FindingKind.BUDGET_DRIFT, now, detail={
                    "authorizationId": row.authorization_id, "owner": row.owner,
                    "ledgerRemaining": str(row.ledger_remaining),
                    "allowance": str(row.allowance), "unsettled": str(row.unsettled)},
                    key=f"{row.authorization_id}:{row.allowance}:{row.ledger_remaining}")
    return found


class _Budget(NamedTuple):
    id: str
    owner: str
    status: str
    remaining: int
    expired: bool  # past its deadline


def _compared(spender: str) -> ColumnElement[bool]:
    return and_(Authorization.spender == spender,
                Authorization.relay_status == RelayStatus.RELAYED,
                Authorization.status.in_((AuthorizationStatus.ACTIVE,
                                          AuthorizationStatus.REVOKED)))


def _ledger(sessions: sessionmaker[Session], chain: ChainGateway, now: datetime,
            only: Collection[str] | None) -> tuple[list[_Budget], dict[str, int], set[str]]:
    """The budgets to compare, unsettled totals by owner, and the owners with a settlement
    or a relay in flight, read in one session."""
    query = select(Authorization).where(_compared(chain.params.spender_lower))
    if only is not None:
        query = query.where(Authorization.id.in_(list(only)))
    with sessions() as session:
        rows = list(session.scalars(query))
        budgets = [_Budget(b.id, b.owner_wallet, b.status.value, remaining(b, now),
                           b.deadline <= now) for b in rows]
        owners = {b.owner for b in budgets}
        unsettled = _unsettled_by_owner(session, owners)
        busy: set[str] = set()
        if owners:
            busy.update(session.scalars(select(Charge.owner_wallet).distinct().where(
                Charge.owner_wallet.in_(owners),
                Charge.settlement_status == SettlementStatus.SETTLING)))
            busy.update(session.scalars(select(Authorization.owner_wallet).distinct().where(
                Authorization.owner_wallet.in_(owners),
                Authorization.spender == chain.params.spender_lower,
                or_(Authorization.relay_status == RelayStatus.PENDING,
                    Authorization.revoke_relay_status == RelayStatus.PENDING))))
    return budgets, unsettled, busy


class DriftWatch:
    """The chain worker's periodic check: ``per_run`` budgets a run in id order, on from
    where the last run stopped, then from the start again, so the node is asked a bounded
    number of allowances each time however many budgets there are. Where it stopped is
    kept in ``chain_cursors`` (shared by the workers, kept over restarts): a worker
    restarted more often than a round takes would otherwise check only the first budgets."""

    def __init__(self, sessions: sessionmaker[Session], chain: ChainGateway, *,
                 per_run: int = 200, clock: Callable[[], datetime] = utcnow) -> None:
        self._sessions = sessions
        self._chain = chain
        self._per_run = per_run
        self._clock = clock

    def __call__(self) -> list[BudgetDrift]:
        with self._sessions() as session:
            cursor = session.get(ChainCursor, CURSOR)
            after = cursor.position or "" if cursor is not None else ""
            ids = list(session.scalars(
                select(Authorization.id).where(_compared(self._chain.params.spender_lower),
                                               Authorization.id > after)
                .order_by(Authorization.id).limit(self._per_run)))
        found = budget_drift(self._sessions, self._chain, self._clock(), record=True,
                             settled_only=True, only=ids) if ids else []
        # After the check: one the node failed is tried again from the same place.
        self._save(ids[-1] if len(ids) == self._per_run else "")
        return found

    def _save(self, position: str) -> None:
        now = self._clock()
        with transaction(self._sessions) as session:
            row = locked_cursor(session, CURSOR, now)
            row.position, row.updated_at = position, now


def _unsettled_by_owner(session: Session, owners: set[str]) -> dict[str, int]:
    if not owners:
        return {}
    rows = session.execute(
        select(Charge.owner_wallet, func.sum(Charge.amount_atomic))
        .where(Charge.owner_wallet.in_(owners), Charge.settlement_status.in_(_UNSETTLED))
        .group_by(Charge.owner_wallet))
    return {owner: int(total or 0) for owner, total in rows}
