"""The data model (SQLAlchemy 2). Enums are stored by value as constrained strings."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

# One metadata: organizations (developer.models) is the FK target of apps.organization_id,
# and the ledger and chain tables reference apps and products.
import payments.chain.models
import payments.developer.models
import payments.ledger.models
import payments.portal.models
import payments.runtime.models
import payments.webhooks.models  # noqa: F401
from payments.db import Base, UtcDateTime, enum_column, utcnow
from payments.ids import IdPrefix, new_id


class AppType(StrEnum):
    GAME = "Game"
    APPLICATION = "Application"


class AppStatus(StrEnum):
    ACTIVE = "active"
    SUSPENDED = "suspended"


class PayToStatus(StrEnum):
    UNBOUND = "unbound"
    TESTING = "testing"
    APPROVED = "approved"


class ListingStatus(StrEnum):
    UNLISTED = "unlisted"
    PENDING_REVIEW = "pending_review"
    LISTED = "listed"
    REJECTED = "rejected"


class AllowlistStatus(StrEnum):
    UNKNOWN = "unknown"
    ALLOWED = "allowed"
    NOT_ALLOWED = "not_allowed"


class RuntimeStatus(StrEnum):
    NOT_CONFIGURED = "not_configured"
    PENDING_VERIFICATION = "pending_verification"
    ACTIVE = "active"
    DISABLED = "disabled"


class DomainRequestStatus(StrEnum):
    NOT_REQUESTED = "not_requested"
    PENDING_MANUAL_DNS = "pending_manual_dns"
    APPROVED = "approved"
    REJECTED = "rejected"


class HostedReviewStatus(StrEnum):
    """The hosted-app review of a service-hosted runtime (spec 1.2 rule 4)."""

    NOT_REQUESTED = "not_requested"
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class RiskMode(StrEnum):
    OPTIMISTIC = "optimistic"
    SETTLED_FIRST = "settled_first"


class Pricing(StrEnum):
    FIXED = "fixed"
    DYNAMIC_ORDER = "dynamic_order"


class ProductStatus(StrEnum):
    ACTIVE = "active"
    DISABLED = "disabled"


class App(Base):
    __tablename__ = "apps"

    id: Mapped[str] = mapped_column(String(40), primary_key=True,
                                    default=lambda: new_id(IdPrefix.APP))
    name: Mapped[str] = mapped_column(String(120))
    slug: Mapped[str] = mapped_column(String(63), unique=True)
    type: Mapped[AppType] = mapped_column(enum_column(AppType), default=AppType.GAME)
    headline: Mapped[str] = mapped_column(String(200), default="")
    entry_url: Mapped[str] = mapped_column(String(2048), default="")
    environment: Mapped[str] = mapped_column(String(32), default="test")
    pay_to: Mapped[str | None] = mapped_column(String(42), default=None)
    pay_to_status: Mapped[PayToStatus] = mapped_column(enum_column(PayToStatus),
                                                       default=PayToStatus.UNBOUND)
    portal_listing_status: Mapped[ListingStatus] = mapped_column(
        enum_column(ListingStatus), default=ListingStatus.UNLISTED)
    status: Mapped[AppStatus] = mapped_column(enum_column(AppStatus), default=AppStatus.ACTIVE)
    recipient_allowlist_status: Mapped[AllowlistStatus] = mapped_column(
        enum_column(AllowlistStatus), default=AllowlistStatus.UNKNOWN)
    distribution_targets: Mapped[list[str]] = mapped_column(JSON, default=list)
    tags: Mapped[list[str]] = mapped_column(JSON, default=list)
    runtime_origin: Mapped[str | None] = mapped_column(String(2048), default=None)
    runtime_status: Mapped[RuntimeStatus] = mapped_column(
        enum_column(RuntimeStatus), default=RuntimeStatus.NOT_CONFIGURED)
    runtime_app_path: Mapped[str] = mapped_column(String(512), default="/")
    runtime_entry_path: Mapped[str] = mapped_column(String(512), default="/")
    runtime_domain_request_status: Mapped[DomainRequestStatus] = mapped_column(
        enum_column(DomainRequestStatus), default=DomainRequestStatus.NOT_REQUESTED)
    # The last verification report (list of checks), shown on the setup page.
    runtime_checks: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    runtime_checked_at: Mapped[datetime | None] = mapped_column(UtcDateTime, default=None)
    runtime_verified_at: Mapped[datetime | None] = mapped_column(UtcDateTime, default=None)
    runtime_domain_requested_at: Mapped[datetime | None] = mapped_column(UtcDateTime,
                                                                         default=None)
    hosted_review_status: Mapped[HostedReviewStatus] = mapped_column(
        enum_column(HostedReviewStatus), default=HostedReviewStatus.NOT_REQUESTED)
    # Categories the reviewer recorded (spec 1.2 rule 4), and their note.
    hosted_review_categories: Mapped[list[str]] = mapped_column(JSON, default=list)
    hosted_review_note: Mapped[str] = mapped_column(String(500), default="")
    organization_id: Mapped[str | None] = mapped_column(
        ForeignKey("organizations.id", ondelete="SET NULL"), default=None, index=True)
    kill_switch: Mapped[bool] = mapped_column(Boolean, default=False)
    kill_switch_reason: Mapped[str] = mapped_column(String(500), default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow,
                                                 onupdate=utcnow)

    products: Mapped[list[Product]] = relationship(back_populates="app")

    @property
    def runtime_served(self) -> bool:
        """Whether ``<slug>.{apps_domain}`` serves this runtime (:func:`serves_runtime`)."""
        return serves_runtime(self.runtime_status, self.runtime_domain_request_status,
                              self.runtime_origin)


class RuntimeBlocker(StrEnum):
    """One reason the runtime host does not serve an app's runtime (worded for people by
    ``payments.runtime.views.not_served_reasons``)."""

    RUNTIME_NOT_ACTIVE = "runtime_not_active"
    NO_ORIGIN = "no_origin"
    DOMAIN_NOT_APPROVED = "domain_not_approved"


def runtime_blockers(runtime_status: str, domain_status: str,
                     origin: str | None) -> tuple[RuntimeBlocker, ...]:
    """Everything that stops ``<slug>.{apps_domain}`` from serving this runtime; none when
    it serves: a verified runtime, a saved origin and an operator-approved domain.

    The one statement of the rule: :func:`serves_runtime` and
    ``payments.runtime.views.not_served_reasons`` (which also checks the kill switch and the
    app's status, for the router's gate and the console) both read it.
    """
    found = []
    if runtime_status != RuntimeStatus.ACTIVE:
        found.append(RuntimeBlocker.RUNTIME_NOT_ACTIVE)
    if not origin:
        found.append(RuntimeBlocker.NO_ORIGIN)
    if domain_status != DomainRequestStatus.APPROVED:
        found.append(RuntimeBlocker.DOMAIN_NOT_APPROVED)
    return tuple(found)


def serves_runtime(runtime_status: str, domain_status: str, origin: str | None) -> bool:
    """Whether the runtime host proxies this runtime, so whether a return URL or a webhook
    URL may point at it.

    Kill switch and app status are refused separately (with their own errors) by every
    caller that moves money, so they are not folded in here.
    """
    return not runtime_blockers(runtime_status, domain_status, origin)


class Product(Base):
    __tablename__ = "products"
    __table_args__ = (
        UniqueConstraint("app_id", "slug", name="uq_products_app_slug"),
        UniqueConstraint("app_id", "sku", name="uq_products_app_sku"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True,
                                    default=lambda: new_id(IdPrefix.PRODUCT))
    app_id: Mapped[str] = mapped_column(ForeignKey("apps.id", ondelete="CASCADE"), index=True)
    slug: Mapped[str] = mapped_column(String(63))
    sku: Mapped[str] = mapped_column(String(120))
    name: Mapped[str] = mapped_column(String(120))
    price_atomic: Mapped[int] = mapped_column(BigInteger)
    template: Mapped[str] = mapped_column(String(64), default="custom")
    risk_mode: Mapped[RiskMode] = mapped_column(enum_column(RiskMode), default=RiskMode.OPTIMISTIC)
    trusted_charge_enabled: Mapped[bool] = mapped_column(Boolean, default=False)
    trusted_charge_proof_required: Mapped[bool] = mapped_column(Boolean, default=True)
    trusted_charge_max_atomic: Mapped[int | None] = mapped_column(BigInteger, default=None)
    fulfillment_adapter: Mapped[str] = mapped_column(String(64), default="webhook")
    fulfillment_config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    pricing: Mapped[Pricing] = mapped_column(enum_column(Pricing), default=Pricing.FIXED)
    min_amount_atomic: Mapped[int | None] = mapped_column(BigInteger, default=None)
    max_amount_atomic: Mapped[int | None] = mapped_column(BigInteger, default=None)
    status: Mapped[ProductStatus] = mapped_column(enum_column(ProductStatus),
                                                  default=ProductStatus.ACTIVE)
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow,
                                                 onupdate=utcnow)

    app: Mapped[App] = relationship(back_populates="products")
