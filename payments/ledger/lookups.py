"""Delivery and receipt lookups (spec 4.3, 5.1): one body for every kind of caller.

A backend calls them on the API host with a ``zpk_`` key (``routes_lookups``); a developer
signed in to the console calls the same paths on the console host with the console session
(spec 5.1 item 5, ``session_lookups``). Who may see the app is the caller's check, passed in
as ``allow``, so both answer alike and another organization's ids stay "not found".

Beyond the spec's lookups, a delivery can be found by the idempotency key the developer
sent (``GET /api/deliveries?idempotencyKey=``, docs/decisions.md): a backend whose answer
was lost and whose webhook is late has only that key, and must learn whether it was
charged before it tells a player to buy again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.datastructures import QueryParams

from payments.chain.params import ChainParams
from payments.errors import ApiError
from payments.ids import charge_seq
from payments.ledger import idempotency
from payments.ledger.charges import DELIVERY_KEY_PREFIX
from payments.ledger.models import Charge, Delivery
from payments.ledger.views import delivery_view, receipt_view
from payments.models import App, Product

Allow = Callable[[App | None, str], App]
MAX_APP_REF = 64  # an app id (48) or slug (63) fits


def nameable(path_value: str) -> bool:
    """PostgreSQL text cannot hold NUL: a path id or slug with one names nothing here."""
    return "\x00" not in path_value


def lookup_delivery(session: Session, delivery_id: str, params: ChainParams,
                    allow: Allow) -> dict[str, Any]:
    delivery = session.get(Delivery, delivery_id) if nameable(delivery_id) else None
    allow(session.get(App, delivery.app_id) if delivery else None, "delivery")
    assert delivery is not None
    return _delivery_answer(session, delivery, params)


@dataclass(frozen=True)
class ByKey:
    """``GET /api/deliveries?idempotencyKey=<key>[&app=<id or slug>]``, read and checked."""

    key: str  # as the developer sent it to the product route or /api/charges
    app: str | None

    @classmethod
    def from_query(cls, query: QueryParams) -> ByKey:
        keys, apps = query.getlist("idempotencyKey"), query.getlist("app")
        # One of each: two keys would be a question with two answers.
        key = idempotency.check_key(keys[0] if len(keys) == 1 else None)
        if len(apps) > 1 or (apps and not (0 < len(apps[0]) <= MAX_APP_REF
                                           and nameable(apps[0]))):
            raise ApiError("invalid_field", 422, "'app' is one app id or slug.", field="app")
        return cls(key, apps[0] if apps else None)


def lookup_delivery_by_key(session: Session, app: App, key: str,
                           params: ChainParams) -> dict[str, Any]:
    """The delivery ``app`` holds under the developer's ``key`` (stored ``svc:`` + key, unique
    per app). None is ``not_found`` with the key echoed, so a client can tell "no delivery
    under this key" (nothing was charged under it) from a 404 of a service or proxy that
    does not have this route."""
    delivery = session.scalar(select(Delivery).where(
        Delivery.app_id == app.id, Delivery.idempotency_key == DELIVERY_KEY_PREFIX + key))
    if delivery is None:
        if key.startswith(DELIVERY_KEY_PREFIX) and session.scalar(select(Delivery.id).where(
                Delivery.app_id == app.id, Delivery.idempotency_key == key)):
            # The delivery's own form of another key: "not found" would read as "not
            # charged" to a caller who meant that key.
            raise ApiError("invalid_idempotency_key", 422, "This is a delivery's key "
                           f"('{DELIVERY_KEY_PREFIX}' + the key sent): send the key as it "
                           "was sent to the product route or /api/charges.",
                           field="idempotencyKey")
        raise ApiError("not_found", 404, "No delivery of this app has this idempotencyKey: "
                       "nothing has been charged under it.", idempotencyKey=key)
    return _delivery_answer(session, delivery, params)


def _delivery_answer(session: Session, delivery: Delivery,
                     params: ChainParams) -> dict[str, Any]:
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
