"""Tables of operator work on runtimes: the audit log and the hosting allowlist."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from payments.db import Base, enum_column, time_column
from payments.ledger.models import SEQ


class OperatorActionKind(StrEnum):
    DOMAIN_APPROVED = "domain_approved"
    DOMAIN_REJECTED = "domain_rejected"
    PAY_TO_APPROVED = "pay_to_approved"
    KILL_SWITCH_ON = "kill_switch_on"
    KILL_SWITCH_OFF = "kill_switch_off"
    REVIEW_APPROVED = "review_approved"
    REVIEW_REJECTED = "review_rejected"
    DEVELOPER_ALLOWLISTED = "developer_allowlisted"
    DEVELOPER_UNLISTED = "developer_unlisted"
    ALLOWLIST_ADD = "allowlist_add"
    ALLOWLIST_REMOVE = "allowlist_remove"
    LISTING_APPROVED = "listing_approved"
    LISTING_REJECTED = "listing_rejected"
    RELAYER_ADD = "relayer_add"
    RELAYER_REMOVE = "relayer_remove"
    CONTRACT_DEPLOYED = "contract_deployed"
    CONTRACT_OWNERSHIP_TRANSFERRED = "contract_ownership_transferred"  # one step (Ownable)
    CONTRACT_OWNERSHIP_OFFERED = "contract_ownership_offered"
    CONTRACT_OWNERSHIP_CANCELLED = "contract_ownership_cancelled"
    CONTRACT_OWNERSHIP_ACCEPTED = "contract_ownership_accepted"


class OperatorAction(Base):
    """One operator decision: who, when, on what, and the facts it rested on.

    Rows are only ever added. ``app_id`` survives as NULL if the app is deleted; ``subject``
    keeps what the action was about (a hostname, an address, a slug) in words.
    """

    __tablename__ = "operator_actions"
    id: Mapped[int] = mapped_column(SEQ, primary_key=True, autoincrement=True)
    operator: Mapped[str] = mapped_column(String(120))
    action: Mapped[OperatorActionKind] = mapped_column(enum_column(OperatorActionKind))
    app_id: Mapped[str | None] = mapped_column(ForeignKey("apps.id", ondelete="SET NULL"),
                                               default=None, index=True)
    subject: Mapped[str] = mapped_column(String(255), default="")
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = time_column()


class HostingAllowlist(Base):
    """Organizations whose service-hosted apps are reviewed first (spec 1.2 rule 4)."""

    __tablename__ = "hosting_allowlist"
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    added_by: Mapped[str] = mapped_column(String(120))
    note: Mapped[str] = mapped_column(String(500), default="")
    created_at: Mapped[datetime] = time_column()
