"""Tables of developer identity: organizations, developers, sessions, grants, keys."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from payments.db import Base, enum_column, id_column, time_column
from payments.ids import IdPrefix


class Organization(Base):
    """Owns apps and API keys (spec 2.6). Single-member today; the model allows more."""

    __tablename__ = "organizations"
    id: Mapped[str] = id_column(IdPrefix.ORGANIZATION)
    name: Mapped[str] = mapped_column(String(120))
    created_at: Mapped[datetime] = time_column()


class Developer(Base):
    __tablename__ = "developers"
    id: Mapped[str] = id_column(IdPrefix.DEVELOPER)
    email: Mapped[str] = mapped_column(String(254), unique=True)  # stored lower-case
    username: Mapped[str] = mapped_column(String(40), unique=True)  # stored lower-case
    password_hash: Mapped[str] = mapped_column(String(200))
    email_verified_at: Mapped[datetime | None] = time_column(nullable=True)
    created_at: Mapped[datetime] = time_column()


class Role(StrEnum):
    OWNER = "owner"
    MEMBER = "member"


class Membership(Base):
    __tablename__ = "memberships"
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    developer_id: Mapped[str] = mapped_column(
        ForeignKey("developers.id", ondelete="CASCADE"), primary_key=True, index=True)
    role: Mapped[Role] = mapped_column(enum_column(Role), default=Role.OWNER)
    created_at: Mapped[datetime] = time_column()


class EmailVerification(Base):
    """The current verification code of a developer (one row; a resend replaces it)."""

    __tablename__ = "email_verifications"
    developer_id: Mapped[str] = mapped_column(
        ForeignKey("developers.id", ondelete="CASCADE"), primary_key=True)
    code_hash: Mapped[str] = mapped_column(String(64))
    expires_at: Mapped[datetime] = time_column()
    last_sent_at: Mapped[datetime] = time_column()
    failed_attempts: Mapped[int] = mapped_column(Integer, default=0)


class ConsoleSession(Base):
    __tablename__ = "console_sessions"
    id: Mapped[str] = id_column(IdPrefix.SESSION)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    developer_id: Mapped[str] = mapped_column(ForeignKey("developers.id", ondelete="CASCADE"),
                                              index=True)
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = time_column()
    last_seen_at: Mapped[datetime] = time_column()
    expires_at: Mapped[datetime] = time_column()
    revoked_at: Mapped[datetime | None] = time_column(nullable=True)


class AuthRequestStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    ISSUED = "issued"


class CliAuthRequest(Base):
    """A CLI asking for a grant (browser or device flow, spec 5.3)."""

    __tablename__ = "cli_auth_requests"
    id: Mapped[str] = id_column(IdPrefix.CLI_AUTH_REQUEST)
    device_code_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_code: Mapped[str] = mapped_column(String(16), unique=True)
    app_slug: Mapped[str | None] = mapped_column(String(63), default=None)
    scopes: Mapped[list[str]] = mapped_column(JSON, default=list)
    ttl_seconds: Mapped[int] = mapped_column(Integer)
    status: Mapped[AuthRequestStatus] = mapped_column(enum_column(AuthRequestStatus),
                                                      default=AuthRequestStatus.PENDING)
    approved_by: Mapped[str | None] = mapped_column(
        ForeignKey("developers.id", ondelete="CASCADE"), default=None)
    approved_app_id: Mapped[str | None] = mapped_column(
        ForeignKey("apps.id", ondelete="CASCADE"), default=None)
    created_at: Mapped[datetime] = time_column()
    expires_at: Mapped[datetime] = time_column()


class CliGrant(Base):
    __tablename__ = "cli_grants"
    id: Mapped[str] = id_column(IdPrefix.CLI_GRANT)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    developer_id: Mapped[str] = mapped_column(ForeignKey("developers.id", ondelete="CASCADE"),
                                              index=True)
    app_id: Mapped[str] = mapped_column(ForeignKey("apps.id", ondelete="CASCADE"), index=True)
    scopes: Mapped[list[str]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = time_column()
    expires_at: Mapped[datetime] = time_column()
    revoked_at: Mapped[datetime | None] = time_column(nullable=True)
    last_used_at: Mapped[datetime | None] = time_column(nullable=True)


class ApiKey(Base):
    """A backend ``zpk_`` key: only its hash and a masked preview are kept."""

    __tablename__ = "api_keys"
    # A create-key request's idempotency key names one key per organization: a retry finds
    # it instead of making a second one, even when the two requests arrive together.
    __table_args__ = (UniqueConstraint("organization_id", "idempotency_key",
                                       name="uq_api_keys_organization_idempotency_key"),)
    id: Mapped[str] = id_column(IdPrefix.API_KEY_RECORD)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True)
    app_id: Mapped[str | None] = mapped_column(ForeignKey("apps.id", ondelete="CASCADE"),
                                               default=None, index=True)
    label: Mapped[str] = mapped_column(String(120), default="")
    environment: Mapped[str] = mapped_column(String(32), default="test")
    scopes: Mapped[list[str]] = mapped_column(JSON, default=list)
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    preview: Mapped[str] = mapped_column(String(40))
    created_by: Mapped[str | None] = mapped_column(
        ForeignKey("developers.id", ondelete="SET NULL"), default=None)
    created_at: Mapped[datetime] = time_column()
    revoked_at: Mapped[datetime | None] = time_column(nullable=True)
    last_used_at: Mapped[datetime | None] = time_column(nullable=True)
    # The hash of the console form's one-time token that created this key (None: made by
    # the API or before forms carried one). Unique, so a form sent twice (a reload of the
    # page showing the secret) makes one key, however close together the two arrive.
    form_token_hash: Mapped[str | None] = mapped_column(String(64), unique=True, default=None)
    # The ``idempotencyKey`` it was created under (None: sent without one, or its 30 days
    # are over) and the hash of what that request asked for (owner, label, scopes,
    # environment), which a retry must match (``payments.developer.key_idempotency``).
    idempotency_key: Mapped[str | None] = mapped_column(String(200), default=None)
    idempotency_request_hash: Mapped[str | None] = mapped_column(String(64), default=None)


class NotificationKind(StrEnum):
    DEVELOPER_APP_REQUESTED = "developer_app_requested"
    RUNTIME_DOMAIN_REQUESTED = "runtime_domain_requested"


class OperatorNotification(Base):
    """Internal notifications for operators; never delivered to developers (spec 6)."""

    __tablename__ = "operator_notifications"
    id: Mapped[str] = id_column(IdPrefix.NOTIFICATION)
    kind: Mapped[NotificationKind] = mapped_column(enum_column(NotificationKind))
    app_id: Mapped[str | None] = mapped_column(ForeignKey("apps.id", ondelete="CASCADE"),
                                               default=None, index=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = time_column()
    handled_at: Mapped[datetime | None] = time_column(nullable=True)
