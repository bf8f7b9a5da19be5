"""Dev mode: what to say when ``svc-server dev`` could not bring its chain back.

``svc-server dev`` keeps its in-process chain in ``var/chain-state``, beside the ledger
(``var/svc.db``), and takes it up again at the next start (router/dev_chain.py). When it
cannot (no file, an unreadable one, one of another chain than the ledger's), a new chain
starts; budgets whose permits were relayed, and settled charges, then name a chain that is
gone: a charge from such a budget is accepted by the ledger and its settlement fails
(``ERC20InsufficientAllowance``), and reconciliation files ``missing_event`` and
``budget_drift`` findings. Nothing on the console says why, so the server says it once, at
start.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from payments.chain.models import ChainTransaction, TxStatus
from payments.ledger.models import Authorization, AuthorizationStatus, RelayStatus


def earlier_chain_rows(sessions: sessionmaker[Session]) -> tuple[int, int]:
    """(active relayed budgets, mined transactions) the ledger holds of a chain."""
    with sessions() as session:
        mined = session.scalar(select(func.count()).select_from(ChainTransaction)
                               .where(ChainTransaction.status == TxStatus.CONFIRMED)) or 0
        budgets = session.scalar(select(func.count()).select_from(Authorization).where(
            Authorization.status == AuthorizationStatus.ACTIVE,
            Authorization.relay_status == RelayStatus.RELAYED)) or 0
    return budgets, mined


def new_chain_note(sessions: sessionmaker[Session], why: str, data_dir: Path,
                   set_aside: Path | None) -> str | None:
    """The warning for a new chain started because of ``why`` (a sentence about the state
    file); None when there is nothing to say (a first start: no file, an empty ledger)."""
    budgets, mined = earlier_chain_rows(sessions)
    kept = f" It was moved to {set_aside}." if set_aside is not None else ""
    if not budgets and not mined:
        if set_aside is None:
            return None
        return f"The in-process chain was not taken up: {why}.{kept} A new chain was started."
    return (f"The database holds {budgets} active budget(s) and {mined} mined chain "
            f"transaction(s) of an earlier in-process chain, which was not taken up: {why}."
            f"{kept} A new chain was started: those permits are not on it, so charges from "
            "those budgets (the dev wallet's too) are recorded and then fail to settle, and "
            "reconciliation files missing_event and budget_drift findings for them. To pay "
            f"and settle again, stop svc-server dev and delete {data_dir} (your console "
            "account, apps and keys go with it), then start it again.")
