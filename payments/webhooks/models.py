"""Webhook endpoints (one per app, spec 8 item 4) and the record of every HTTP try.

The outbox itself is ``webhook_attempts`` (``payments.ledger.models``): one row per event,
written by the ledger in the transaction that created the event.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import JSON, Boolean, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from payments.db import Base, UtcDateTime, enum_column, id_column, time_column, utcnow
from payments.ids import IdPrefix
from payments.ledger.models import SEQ

EVENT_TYPES = ("payment.delivered", "payment.settled", "delivery.created")


class EndpointStatus(StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"  # kept with its secret; events due meanwhile are skipped


class WebhookEndpoint(Base):
    __tablename__ = "webhook_endpoints"
    id: Mapped[str] = id_column(IdPrefix.WEBHOOK)
    app_id: Mapped[str] = mapped_column(ForeignKey("apps.id", ondelete="CASCADE"), unique=True)
    url: Mapped[str] = mapped_column(String(2048))
    events: Mapped[list[str]] = mapped_column(JSON, default=list)
    status: Mapped[EndpointStatus] = mapped_column(enum_column(EndpointStatus),
                                                  default=EndpointStatus.ENABLED)
    # The signing secret, sealed with a key derived from the server secret (see
    # payments.webhooks.signing_secrets): a database dump alone does not reveal it.
    secret_sealed: Mapped[str] = mapped_column(String(200))
    secret_preview: Mapped[str] = mapped_column(String(40))  # zwhsec_…abcd
    secret_created_at: Mapped[datetime] = time_column()
    created_at: Mapped[datetime] = time_column()
    updated_at: Mapped[datetime] = time_column()


class WebhookTry(Base):
    """One HTTP request of an attempt: what the console's debugger shows. Never a header,
    a body, a signature or a secret; ``error`` is a short class such as ``timeout``."""

    __tablename__ = "webhook_tries"
    id: Mapped[int] = mapped_column(SEQ, primary_key=True, autoincrement=True)
    attempt_id: Mapped[str] = mapped_column(
        ForeignKey("webhook_attempts.id", ondelete="CASCADE"), index=True)
    endpoint_id: Mapped[str | None] = mapped_column(String(48), default=None)
    number: Mapped[int] = mapped_column(Integer)  # 1 for the first request of the event
    response_status: Mapped[int | None] = mapped_column(Integer, default=None)
    error: Mapped[str | None] = mapped_column(String(120), default=None)
    signed: Mapped[bool] = mapped_column(Boolean, default=False)
    duration_ms: Mapped[int] = mapped_column(Integer, default=0)
    # Indexed for the retention sweep (docs/webhooks.md).
    sent_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, index=True)
