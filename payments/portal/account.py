"""The account page's records for one proven wallet: connected apps, spend, unlinking;
and the public list of apps that can take the global budget (Ready Apps)."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import CursorResult, select, update
from sqlalchemy.orm import Session

from payments.errors import ApiError
from payments.ids import charge_id
from payments.ledger.models import (
    AccountConnection,
    Authorization,
    Charge,
    ConnectionStatus,
)
from payments.models import App, AppStatus, ListingStatus, Product

SPEND_RECORDS = 50


def connected_apps(session: Session, wallet: str) -> list[dict[str, Any]]:
    """Active account connections bound to ``wallet`` (spec 2.7 Connection), newest first."""
    rows = session.execute(
        select(AccountConnection, App).join(App, App.id == AccountConnection.app_id)
        .where(AccountConnection.owner_wallet == wallet.lower(),
               AccountConnection.status == ConnectionStatus.ACTIVE)
        .order_by(AccountConnection.bound_at.desc())).all()
    return [{"id": connection.id, "status": connection.status.value,
             "app": {"slug": app.slug, "name": app.name},
             "gameAccountLabel": connection.game_account_label,
             "boundAt": connection.bound_at.isoformat()} for connection, app in rows]


def spend_records(session: Session, wallet: str,
                  limit: int = SPEND_RECORDS) -> list[dict[str, Any]]:
    """The wallet's charges, newest first: through its budgets (indexed by owner), not
    by scanning charges."""
    budgets = select(Authorization.id).where(Authorization.owner_wallet == wallet.lower())
    rows = session.execute(
        select(Charge, Product, App).join(Product, Product.id == Charge.product_id)
        .join(App, App.id == Charge.app_id)
        .where(Charge.authorization_id.in_(budgets))
        .order_by(Charge.seq.desc()).limit(limit)).all()
    return [{"chargeId": charge_id(charge.seq), "createdAt": charge.created_at.isoformat(),
             "app": {"slug": app.slug, "name": app.name},
             "product": {"slug": product.slug, "name": product.name},
             "amountAtomic": str(charge.amount_atomic),
             "settlementStatus": charge.settlement_status.value}
            for charge, product, app in rows]


def unlink(session: Session, wallet: str, connection_id: str) -> None:
    """End one of the wallet's connections; the app must hand off again to use the budget.

    Conditional on the owner: a session can only unlink its own wallet's connections.
    """
    done = cast(CursorResult[Any], session.execute(
        update(AccountConnection)
        .where(AccountConnection.id == connection_id,
               AccountConnection.owner_wallet == wallet.lower(),
               AccountConnection.status == ConnectionStatus.ACTIVE)
        .values(status=ConnectionStatus.UNLINKED)
        .execution_options(synchronize_session=False))).rowcount
    if not done:
        raise ApiError("connection_not_found", 404, "No active connection with this id for "
                       "this wallet.")


def ready_apps(session: Session, limit: int = 50) -> list[App]:
    """Listed, active apps: each takes the global budget through its hosted entry."""
    return list(session.scalars(select(App).where(
        App.status == AppStatus.ACTIVE, App.kill_switch.is_(False),
        App.portal_listing_status == ListingStatus.LISTED).order_by(App.name).limit(limit)))
