"""A delivery's events are found through ``ix_webhook_events_delivery_id`` (migration 0014):
the planner, asked about the dispatcher's own lookup of a delivery's legacy twin
(``outbox.legacy_twin``, run before each ``delivery.created`` is written), reads the index on
SQLite and on PostgreSQL, over a table of many deliveries' events; without the index (the
schema of 0013) it reads every event."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from payments import migrate
from payments.db import make_engine, transaction, utcnow
from payments.ledger.models import Authorization, Charge, Delivery, DeliveryStatus, WebhookEvent
from payments.models import Product
from payments.webhooks.outbox import legacy_twin
from tests.factories import add_developer, add_owned_app
from tests.webhooks.test_attempt_index import explained

INDEX = "ix_webhook_events_delivery_id"
DELIVERIES = 600
WALLET = "0x" + "1" * 40


def _fill(sessions: sessionmaker[Session]) -> str:
    """Deliveries, each with its payment.delivered and payment.settled events, as the ledger
    and the settlement worker write them; the id of one in the middle."""
    _, organization_id = add_developer(sessions)
    app = add_owned_app(sessions, organization_id, "game")
    now = utcnow()
    with transaction(sessions) as session:
        product = Product(app_id=app.id, slug="gem", sku="gem", name="Gem", price_atomic=10_000)
        budget = Authorization(owner_wallet=WALLET, spender=WALLET, token=WALLET, chain_id=1,
                               value_atomic=10**12, deadline=now + timedelta(days=1), nonce=1,
                               signature="0x", created_at=now)
        session.add_all([product, budget])
        session.flush()
        ids = []
        for n in range(DELIVERIES):
            charge = Charge(app_id=app.id, product_id=product.id, authorization_id=budget.id,
                            owner_wallet=WALLET, pay_to=WALLET, amount_atomic=10_000,
                            created_at=now)
            session.add(charge)
            session.flush()
            delivery = Delivery(app_id=app.id, product_id=product.id, charge_seq=charge.seq,
                                idempotency_key=f"svc:k{n}", wallet_address=WALLET,
                                status=DeliveryStatus.DELIVERED, created_at=now)
            session.add(delivery)
            session.flush()
            session.add_all([WebhookEvent(app_id=app.id, type=kind, delivery_id=delivery.id,
                                          payload={}, created_at=now)
                             for kind in ("payment.delivered", "payment.settled")])
            ids.append(delivery.id)
    return ids[DELIVERIES // 2]


def _plan(engine: Engine, delivery_id: str) -> str:
    with engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    with engine.connect() as conn, explained(engine) as lines:
        conn.execute(legacy_twin(delivery_id))
    return "\n".join(lines)


def test_the_legacy_twin_lookup_reads_the_delivery_index(
        sessions: sessionmaker[Session], db_url: str) -> None:
    delivery_id = _fill(sessions)
    engine = make_engine(db_url)
    try:
        plan = _plan(engine, delivery_id)
        assert INDEX in plan, plan  # SQLite: USING INDEX; PostgreSQL: (Bitmap) Index Scan
        migrate.downgrade(engine, "0013")  # the schema without it: every event is read
        plan = _plan(engine, delivery_id)
        assert INDEX not in plan and ("SCAN webhook_events" in plan
                                      or "Seq Scan on webhook_events" in plan), plan
        migrate.upgrade(engine)
        assert INDEX in _plan(engine, delivery_id)
    finally:
        engine.dispose()
