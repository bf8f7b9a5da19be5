"""Recording a charge: one unit of work that moves and promises money (spec 1.3, 4.1).

Everything happens in the caller's transaction: the budget reservation, the charge, its
delivery, the ``payment.delivered`` event and its outbox attempt, and the charge's
place in the settlement queue (``queued``). Nothing here talks to the chain or to
webhook receivers; their workers read what this writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, insert
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from payments.chain.params import ChainParams
from payments.dbapi import Compiled
from payments.errors import ApiError
from payments.ids import IdPrefix, new_id
from payments.ledger.authorizations import current_authorization, refusal, reserve
from payments.ledger.models import (
    AttemptStatus,
    Authorization,
    Charge,
    Delivery,
    DeliveryStatus,
    Order,
    OrderStatus,
    SettlementStatus,
    WebhookAttempt,
    WebhookEvent,
)
from payments.ledger.views import event_payload
from payments.models import AllowlistStatus, App, AppStatus, Product, RiskMode

# The tables of the hot path's Core statements.
_CHARGES = cast(Table, Charge.__table__)
_DELIVERIES = cast(Table, Delivery.__table__)
_EVENTS = cast(Table, WebhookEvent.__table__)
_ATTEMPTS = cast(Table, WebhookAttempt.__table__)
# Compiled once and run on the driver's cursor (payments.dbapi): this is every payment's
# path, and SQLAlchemy's per-statement machinery cost more CPU than the SQL.
_INSERT_CHARGE = Compiled.insert(_CHARGES, insert(_CHARGES).returning(_CHARGES.c.seq))
# ON CONFLICT (app_id, idempotency_key) DO NOTHING RETURNING id, per backend: a reused
# key costs no savepoint round trips.
_INSERT_DELIVERY = Compiled.insert(_DELIVERIES, {
    name: make(_DELIVERIES).on_conflict_do_nothing(
        index_elements=["app_id", "idempotency_key"]).returning(_DELIVERIES.c.id)
    for name, make in (("postgresql", postgresql_insert), ("sqlite", sqlite_insert))})
_INSERT_EVENT = Compiled.insert(_EVENTS, insert(_EVENTS))
_INSERT_ATTEMPT = Compiled.insert(_ATTEMPTS, insert(_ATTEMPTS))
_PAY_TO_RE = re.compile(r"^0x[0-9a-fA-F]{40}\Z")
# Deliveries of real charges carry this prefix in their idempotency key (spec 2.1).
DELIVERY_KEY_PREFIX = "svc:"


@dataclass(frozen=True)
class ChargeIntent:
    app: App
    product: Product
    authorization: Authorization
    amount: int
    order: Order | None
    developer_user_id: str | None
    idempotency_key: str
    source: str  # "product_route" | "trusted_server"


@dataclass(frozen=True)
class Recorded:
    charge: Charge
    delivery: Delivery
    event: WebhookEvent | None


def check_payable(app: App) -> str:
    """The app's recipient, if the product route may pay it (spec 7)."""
    if app.status != AppStatus.ACTIVE or app.kill_switch:
        raise ApiError("APP_UNAVAILABLE", 403, "This app is not accepting payments right now.")
    if not app.pay_to or not _PAY_TO_RE.match(app.pay_to):
        raise ApiError("APP_PAY_TO_INVALID", 403, "The app has no valid pay_to address; the "
                       "developer must set one.")
    if app.recipient_allowlist_status != AllowlistStatus.ALLOWED:
        raise ApiError("RECIPIENT_NOT_ALLOWLISTED", 403, "The app's pay_to address is not on "
                       "the spender contract's allowlist yet.")
    return app.pay_to


def record_charge(session: Session, intent: ChargeIntent, params: ChainParams,
                  now: datetime) -> Recorded:
    """Write the charge, its delivery and its event, then reserve the budget.

    Core statements, not the ORM's unit of work: this is the hot path of every payment and
    the flushes cost more CPU than the SQL (bench/ledger_bench.py). The returned objects
    are transient: views read them, nothing adds them to the session."""
    pay_to = check_payable(intent.app)
    if intent.amount <= 0:
        raise ApiError("invalid_amount", 422, "The amount must be above zero.")
    authorization = intent.authorization
    charge = Charge(app_id=intent.app.id, product_id=intent.product.id,
                    order_id=intent.order.id if intent.order else None,
                    authorization_id=authorization.id, owner_wallet=authorization.owner_wallet,
                    pay_to=pay_to, amount_atomic=intent.amount,
                    settlement_status=SettlementStatus.QUEUED, batch_id=None,
                    settlement_tx_hash=None, source=intent.source, created_at=now,
                    settled_at=None)
    charge.seq = _INSERT_CHARGE.scalar(session, _columns(charge, _CHARGES))
    ready = intent.product.risk_mode == RiskMode.OPTIMISTIC
    delivery = Delivery(
        id=new_id(IdPrefix.DELIVERY), app_id=intent.app.id, product_id=intent.product.id,
        charge_seq=charge.seq, order_id=charge.order_id,
        idempotency_key=DELIVERY_KEY_PREFIX + intent.idempotency_key,
        developer_user_id=intent.developer_user_id, wallet_address=authorization.owner_wallet,
        status=DeliveryStatus.DELIVERED if ready else DeliveryStatus.AWAITING_SETTLEMENT,
        fulfilled=False, delivered_at=now if ready else None, created_at=now)
    inserted = _INSERT_DELIVERY.first(session, _columns(delivery, _DELIVERIES))
    if inserted is None:
        # The grant key is the developer's dedupe key: a second delivery under it would be
        # dropped by their ledger, so a reused key (after its record expired, or on another
        # payment path) is refused rather than charged.
        raise ApiError("IDEMPOTENCY_KEY_REUSED", 409, "This idempotencyKey already names "
                       "another delivery of this app; use a new key for a new purchase.")
    # payment.delivered is the fulfilment signal within the product's risk mode (spec
    # 1.6): a settled_first delivery gets it from the settlement worker, once settled.
    event = enqueue_event(session, "payment.delivered", intent.app, intent.product, charge,
                          delivery, params, now) if ready else None
    if intent.order is not None:
        intent.order.status = OrderStatus.PAID
        intent.order.charge_seq = charge.seq
        intent.order.paid_at = now
        session.flush()
    # The budget row is reserved last: its lock is then held only until the commit that
    # follows, not across the inserts above (bench/ledger_bench.py measured the difference).
    spent = reserve(session, authorization.id, intent.amount, now)
    if spent is None:
        raise refusal(current_authorization(session, authorization.id), intent.amount, now)
    set_committed_value(authorization, "spent_atomic", spent)
    return Recorded(charge, delivery, event)


def enqueue_event(session: Session, event_type: str, app: App, product: Product, charge: Charge,
                  delivery: Delivery, params: ChainParams, now: datetime) -> WebhookEvent:
    """Write an event and its pending outbox attempt in the caller's transaction."""
    event_id = new_id(IdPrefix.EVENT)
    event = WebhookEvent(id=event_id, app_id=app.id, type=event_type, delivery_id=delivery.id,
                         created_at=now, payload=event_payload(event_id, event_type, now, app,
                                                               product, charge, delivery, params))
    attempt = WebhookAttempt(id=new_id(IdPrefix.WEBHOOK_ATTEMPT), event_id=event_id,
                             status=AttemptStatus.PENDING, attempt_count=0,
                             next_attempt_at=now, response_status=None, signed=False,
                             updated_at=now)
    _INSERT_EVENT.run(session, _columns(event, _EVENTS))
    _INSERT_ATTEMPT.run(session, _columns(attempt, _ATTEMPTS))
    return event


def _columns(obj: object, table: Table) -> dict[str, Any]:
    """The column values of a transient object, for an INSERT. A computed default that is
    not given fails the INSERT (payments.dbapi); a charge's rows are checked column by
    column in tests/ledger/test_pay_flow.py."""
    return {c.key: getattr(obj, c.key) for c in table.columns if c.key in obj.__dict__}
