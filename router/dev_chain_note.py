"""Dev mode: what an earlier run left in the ledger that the new in-process chain lacks.

``svc-server dev`` keeps its SQLite file (``var/svc.db``) from run to run, but the
in-process chain starts empty each run (docs/chain.md). Budgets whose permits were relayed,
and settled charges, then name a chain that is gone: a charge from such a budget is
accepted by the ledger and its settlement fails (``ERC20InsufficientAllowance``), and
reconciliation files ``missing_event`` and ``budget_drift`` findings. Nothing on the
console says why, so the server says it once, at start.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from payments.chain.models import ChainTransaction, TxStatus
from payments.ledger.models import Authorization, AuthorizationStatus, RelayStatus


def earlier_chain_note(sessions: sessionmaker[Session], chain_backend: str) -> str | None:
    """A warning when the ledger holds chain state of an earlier run, else ``None``."""
    if chain_backend != "in_process":
        return None  # a node over JSON-RPC keeps its state between runs
    with sessions() as session:
        mined = session.scalar(select(func.count()).select_from(ChainTransaction)
                               .where(ChainTransaction.status == TxStatus.CONFIRMED)) or 0
        budgets = session.scalar(select(func.count()).select_from(Authorization).where(
            Authorization.status == AuthorizationStatus.ACTIVE,
            Authorization.relay_status == RelayStatus.RELAYED)) or 0
    if not mined and not budgets:
        return None
    return (f"The database holds {budgets} active budget(s) and {mined} mined chain "
            "transaction(s) from an earlier run, but the in-process chain starts empty each "
            "run: those permits are not on it, so charges from those budgets (the dev "
            "wallet's too) are recorded and then fail to settle, and reconciliation files "
            "missing_event and budget_drift findings for them. To pay and settle again, "
            "stop svc-server dev and delete var/ (your console account, apps and keys go "
            "with it), then start it again.")
