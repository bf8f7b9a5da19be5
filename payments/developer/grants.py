"""CLI grants (spec 5.3): approved in a browser or by device code, one app, expiring.

A grant is not an API key: it can only reach the developer API, and only with the
scopes below. Settlement, ``pay_to`` review, listing review, allowlist owner and admin
operations accept no grant at all; they are ``svc-ops`` commands.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from payments.developer.models import AuthRequestStatus, CliAuthRequest, CliGrant
from payments.developer.tokens import new_token, normalize_user_code, token_hash, user_code
from payments.errors import ApiError
from payments.ids import IdPrefix
from payments.models import App
from payments.slugs import is_valid_slug

# Exactly spec 5.3's list. Config plan/apply is tooling over the same API (spec 4.10), so it
# asks for these scopes too (payments.config.api), not for scopes of its own.
CLI_SCOPES = ("apps:read", "apps:write", "products:write", "webhooks:write", "runtime:write",
              "keys:create")
DEFAULT_SCOPES = ("apps:read",)
# What a config apply can need: read, plus the write scope of each kind of change.
CONFIG_SCOPES = ("apps:read", "apps:write", "products:write", "webhooks:write",
                 "runtime:write")
# Names that earlier builds accepted; refused now, with where their rights went.
RETIRED_SCOPES = {"config:read": "apps:read",
                  "config:write": "apps:write, products:write, webhooks:write, runtime:write"}
DEFAULT_TTL = timedelta(hours=2)
MAX_TTL = timedelta(days=30)
MIN_TTL = timedelta(minutes=1)
REQUEST_LIFETIME = timedelta(minutes=10)
POLL_INTERVAL_SECONDS = 2


def check_scopes(scopes: list[str] | None) -> list[str]:
    if not scopes:
        return list(DEFAULT_SCOPES)
    unknown = [s for s in scopes if s not in CLI_SCOPES]
    if unknown:
        retired = "".join(f" {s} is no longer a scope: config uses {RETIRED_SCOPES[s]}."
                          for s in unknown if s in RETIRED_SCOPES)
        raise ApiError("invalid_scope", 422, f"Unknown CLI grant scope(s): {', '.join(unknown)}."
                       f" Grants can hold: {', '.join(CLI_SCOPES)}.{retired}", scopes=unknown)
    return sorted(set(scopes), key=CLI_SCOPES.index)


def check_ttl(seconds: int | None) -> timedelta:
    if seconds is None:
        return DEFAULT_TTL
    ttl = timedelta(seconds=seconds)
    if not MIN_TTL <= ttl <= MAX_TTL:
        raise ApiError("invalid_ttl", 422, "A grant lives between 1 minute and 30 days.")
    return ttl


@dataclass(frozen=True)
class StartedRequest:
    device_code: str  # the CLI's secret for polling; only its hash is stored
    record: CliAuthRequest


def start_request(session: Session, *, app_slug: str | None, scopes: list[str] | None,
                  ttl_seconds: int | None, now: datetime) -> StartedRequest:
    if app_slug is not None and not is_valid_slug(app_slug):
        raise ApiError("invalid_app", 422, f"'{app_slug}' is not an app slug.")
    device_code = new_token()
    record = CliAuthRequest(device_code_hash=token_hash(device_code), user_code=user_code(),
                            app_slug=app_slug, scopes=check_scopes(scopes),
                            ttl_seconds=int(check_ttl(ttl_seconds).total_seconds()),
                            created_at=now, expires_at=now + REQUEST_LIFETIME)
    session.add(record)
    session.flush()
    return StartedRequest(device_code, record)


def pending_request(session: Session, code: str, now: datetime) -> CliAuthRequest:
    """The request a developer is about to approve, by the user code the CLI showed."""
    record = session.scalar(select(CliAuthRequest).where(
        CliAuthRequest.user_code == normalize_user_code(code)).with_for_update())
    if record is None or record.expires_at <= now:
        raise ApiError("cli_request_not_found", 404, "No pending CLI sign-in has this code; "
                       "it may have expired. Run the `svc auth` command again.")
    if record.status != AuthRequestStatus.PENDING:
        raise ApiError("cli_request_used", 409, "This CLI sign-in was already answered.")
    return record


def approve(record: CliAuthRequest, *, developer_id: str, app: App) -> None:
    record.status = AuthRequestStatus.APPROVED
    record.approved_by = developer_id
    record.approved_app_id = app.id


def deny(record: CliAuthRequest) -> None:
    record.status = AuthRequestStatus.DENIED


@dataclass(frozen=True)
class IssuedGrant:
    token: str  # shown to the CLI once
    grant: CliGrant


def redeem(session: Session, device_code: str, now: datetime) -> IssuedGrant:
    """Exchange an approved request for a grant, exactly once."""
    record = session.scalar(select(CliAuthRequest).where(
        CliAuthRequest.device_code_hash == token_hash(device_code)).with_for_update())
    if record is None:
        raise ApiError("invalid_device_code", 400, "Unknown device code.")
    if record.status == AuthRequestStatus.DENIED:
        raise ApiError("access_denied", 403, "The sign-in was denied in the console.")
    if record.status == AuthRequestStatus.ISSUED:
        raise ApiError("invalid_device_code", 400, "This device code was already used.")
    if record.expires_at <= now:
        raise ApiError("expired_token", 410, "The sign-in request expired; run `svc auth` "
                       "again.")
    if record.status == AuthRequestStatus.PENDING:
        raise ApiError("authorization_pending", 400, "Waiting for approval in the console.",
                       interval=POLL_INTERVAL_SECONDS)
    assert record.approved_by is not None and record.approved_app_id is not None
    token = new_token(IdPrefix.CLI_GRANT_TOKEN.value)
    grant = CliGrant(token_hash=token_hash(token), developer_id=record.approved_by,
                     app_id=record.approved_app_id, scopes=list(record.scopes), created_at=now,
                     expires_at=now + timedelta(seconds=record.ttl_seconds))
    record.status = AuthRequestStatus.ISSUED
    session.add(grant)
    session.flush()
    return IssuedGrant(token, grant)


def grant_for_token(session: Session, token: str, now: datetime) -> CliGrant:
    grant = session.scalar(select(CliGrant).where(CliGrant.token_hash == token_hash(token)))
    if grant is None or grant.revoked_at is not None:
        raise ApiError("developer_auth_required", 401, "This CLI grant is not valid; run "
                       "`svc auth browser` (or `svc auth device`) to sign in.")
    if grant.expires_at <= now:
        raise ApiError("developer_grant_expired", 401, "This CLI grant has expired; run "
                       "`svc auth browser` (or `svc auth device`) to sign in again.")
    return grant


def require_grant_scope(grant: CliGrant, scope: str, app_slug: str) -> None:
    require_grant_scopes(grant, (scope,), app_slug)


def require_grant_scopes(grant: CliGrant, scopes: Iterable[str], app_slug: str) -> None:
    """Refuse naming the first of ``scopes`` the grant lacks; the sign-in command to rerun
    adds every missing one, so one rerun is enough."""
    missing = [s for s in dict.fromkeys(scopes) if s not in grant.scopes]
    if not missing:
        return
    # A grant from before the config:* names were retired may still hold them; the command
    # asks only for scopes that exist.
    wanted = ",".join(s for s in CLI_SCOPES if s in grant.scopes or s in missing)
    command = f"svc auth browser --app {app_slug} --scopes {wanted}"
    raise ApiError("developer_cli_scope_missing", 403, f"This CLI grant lacks the scope "
                   f"'{missing[0]}'. Run: {command}", scope=missing[0], command=command)


def revoke_grant(grant: CliGrant, now: datetime) -> None:
    if grant.revoked_at is None:
        grant.revoked_at = now
