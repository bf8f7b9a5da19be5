"""Delivery and receipt lookups (spec 4.4, 5.1): one body for every kind of caller.

A backend calls them on the API host with a ``zpk_`` key (``routes_payments``); a developer
signed in to the console calls the same paths on the console host with the console session
(spec 5.1 item 5, ``session_lookups``). Who may see the app is the caller's check, passed in
as ``allow``, so both answer alike and another organization's ids stay "not found".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from payments.chain.params import ChainParams
from payments.ids import charge_seq
from payments.ledger.models import Charge, Delivery
from payments.ledger.views import delivery_view, receipt_view
from payments.models import App, Product

Allow = Callable[[App | None, str], App]


def nameable(path_value: str) -> bool:
    """PostgreSQL text cannot hold NUL: a path id or slug with one names nothing here."""
    return "\x00" not in path_value


def lookup_delivery(session: Session, delivery_id: str, params: ChainParams,
                    allow: Allow) -> dict[str, Any]:
    delivery = session.get(Delivery, delivery_id) if nameable(delivery_id) else None
    allow(session.get(App, delivery.app_id) if delivery else None, "delivery")
    assert delivery is not None
    charge = session.get(Charge, delivery.charge_seq)
    product = session.get(Product, delivery.product_id)
    assert charge is not None and product is not None
    return {"delivery": delivery_view(delivery, charge, product, params)}


def lookup_receipt(session: Session, charge_id: str, params: ChainParams,
                   allow: Allow) -> dict[str, Any]:
    seq = charge_seq(charge_id)
    # A well-formed id above BIGINT cannot be ours (and would not bind as a key).
    charge = session.get(Charge, seq) if seq and seq < 2**63 else None
    app = allow(session.get(App, charge.app_id) if charge else None, "receipt")
    assert charge is not None
    delivery = session.scalar(select(Delivery).where(Delivery.charge_seq == charge.seq))
    product = session.get(Product, charge.product_id)
    assert delivery is not None and product is not None
    return {"receipt": receipt_view(charge, delivery, app, product, params)}
