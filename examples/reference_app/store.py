"""The durable fulfilment store: one grant per delivery, whoever reports it first.

A grant can be reported by the signed webhook, a trusted delivery lookup, a verified
``paymentProof`` or a reconcile; they race. UNIQUE constraints on ``delivery_id`` and on
``idempotency_key`` and ``INSERT ... ON CONFLICT DO NOTHING`` make the first writer win and
every other one a no-op, in any number of processes, on SQLite and PostgreSQL alike (no
check-then-write). Inventory is derived from grants, never stored beside them, so it cannot
drift from what was paid.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Engine,
    MetaData,
    String,
    Table,
    create_engine,
    func,
    or_,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url

metadata = MetaData()
# The service's prefix on a delivery's idempotency key: ``svc:`` + the key the app sent.
DELIVERY_KEY_PREFIX = "svc:"

grants = Table(
    "refapp_grants", metadata,
    Column("delivery_id", String(64), nullable=False, unique=True),
    Column("idempotency_key", String(260), nullable=False, unique=True),
    Column("developer_user_id", String(200), nullable=True, index=True),
    Column("product_id", String(64), nullable=False),
    Column("product_slug", String(64), nullable=True),
    Column("amount_atomic", BigInteger, nullable=True),
    Column("source", String(32), nullable=False),  # webhook | lookup | proof | reconcile
    Column("event_id", String(64), nullable=True),
    Column("granted_at", DateTime(timezone=True), nullable=False),
)

settlements = Table(
    "refapp_settlements", metadata,
    Column("delivery_id", String(64), primary_key=True),
    Column("event_id", String(64), nullable=False),
    Column("tx_hash", String(80), nullable=True),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
)


@dataclass(frozen=True)
class Grant:
    delivery_id: str
    idempotency_key: str
    developer_user_id: str | None
    product_id: str
    product_slug: str | None
    amount_atomic: int | None
    source: str
    event_id: str | None = None
    granted_at: datetime | None = None

    def view(self) -> dict[str, Any]:
        return {"deliveryId": self.delivery_id, "idempotencyKey": self.idempotency_key,
                "developerUserId": self.developer_user_id, "productId": self.product_id,
                "productSlug": self.product_slug,
                "amountAtomic": None if self.amount_atomic is None else str(self.amount_atomic),
                "source": self.source,
                "grantedAt": self.granted_at.isoformat() if self.granted_at else None}


@dataclass(frozen=True)
class InventoryLine:
    product_id: str
    product_slug: str | None
    count: int


def engine_for(database_url: str) -> Engine:
    url = make_url(database_url)
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")  # psycopg 3, the driver we ship
    if url.get_backend_name() == "sqlite":
        # Several request threads write one file: wait for the lock instead of failing.
        return create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})
    return create_engine(url, pool_pre_ping=True)


class FulfilmentStore:
    """Synchronous (SQLAlchemy Core); the app calls it from a worker thread."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def create_schema(self) -> None:
        metadata.create_all(self.engine)

    def _insert(self, table: Table) -> Any:
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        return dialect.insert(table)

    def grant_once(self, grant: Grant) -> tuple[Grant, bool]:
        """The stored grant for this delivery, and whether this call created it."""
        row = {**grant.__dict__, "granted_at": datetime.now(UTC)}
        # No conflict target: a clash on either unique column makes the insert a no-op.
        # RETURNING tells whether this call inserted (rowcount is not reliable for
        # ON CONFLICT on every driver).
        statement = (self._insert(grants).values(**row).on_conflict_do_nothing()
                     .returning(grants.c.delivery_id))
        with self.engine.begin() as conn:
            created = conn.execute(statement).first() is not None
        stored = self.find(delivery_id=grant.delivery_id,
                           idempotency_key=grant.idempotency_key)
        assert stored is not None  # inserted now or before; grants are never deleted
        return stored, created

    def find(self, *, delivery_id: str | None = None,
             idempotency_key: str | None = None) -> Grant | None:
        """The grant of a delivery id or idempotency key. The key matches as the app sent it
        (``ref:...``) or as the service stores it on the delivery (``svc:ref:...``)."""
        conditions = []
        if delivery_id:
            conditions.append(grants.c.delivery_id == delivery_id)
        if idempotency_key:
            conditions.append(grants.c.idempotency_key.in_(
                [idempotency_key, DELIVERY_KEY_PREFIX + idempotency_key]))
        if not conditions:
            return None
        with self.engine.connect() as conn:
            row = conn.execute(select(grants).where(or_(*conditions)).limit(1)).mappings().first()
        return Grant(**row) if row is not None else None

    def record_settlement(self, delivery_id: str, event_id: str, tx_hash: str | None) -> bool:
        statement = self._insert(settlements).values(
            delivery_id=delivery_id, event_id=event_id, tx_hash=tx_hash,
            recorded_at=datetime.now(UTC)).on_conflict_do_nothing().returning(
            settlements.c.delivery_id)
        with self.engine.begin() as conn:
            return conn.execute(statement).first() is not None

    def settlement(self, delivery_id: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(settlements).where(
                settlements.c.delivery_id == delivery_id)).mappings().first()
        return dict(row) if row is not None else None

    def inventory(self, developer_user_id: str) -> list[InventoryLine]:
        count = func.count().label("count")
        query = (select(grants.c.product_id, func.max(grants.c.product_slug), count)
                 .where(grants.c.developer_user_id == developer_user_id)
                 .group_by(grants.c.product_id).order_by(grants.c.product_id))
        with self.engine.connect() as conn:
            return [InventoryLine(product_id, slug, int(n))
                    for product_id, slug, n in conn.execute(query)]

    def grants_of(self, developer_user_id: str) -> list[Grant]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(grants).where(
                grants.c.developer_user_id == developer_user_id)
                .order_by(grants.c.granted_at)).mappings().all()
        return [Grant(**row) for row in rows]
