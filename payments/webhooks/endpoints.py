"""Creating, changing and rotating an app's webhook endpoint (spec 5.5, 5.6, 8 item 4).

URL rules are ``manifest.url_policy``'s. Registration checks the text, then resolves the
name (dnspython) and refuses it unless every answer is an allowed address; the dispatcher
checks both again before each request. Resolving happens outside any transaction (see
``api.py``): a slow DNS server must never hold a database lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from manifest.url_policy import (
    CheckedUrl,
    Resolver,
    UrlPolicy,
    UrlRefused,
    check_webhook_url,
    resolve_checked,
)
from payments.errors import ApiError
from payments.ids import IdPrefix, new_id
from payments.models import App
from payments.webhooks.models import EVENT_TYPES, EndpointStatus, WebhookEndpoint
from payments.webhooks.signing_secrets import SecretBox, new_signing_secret, preview

DEFAULT_EVENTS = ("payment.delivered",)


@dataclass(frozen=True)
class UrlChecks:
    """What the URL rules need, built by the composition root."""

    policy: UrlPolicy
    resolver: Resolver


@dataclass(frozen=True)
class Created:
    endpoint: WebhookEndpoint
    secret: str  # returned to the caller once, never stored in the clear


def url_error(exc: UrlRefused) -> ApiError:
    if exc.transient:
        return ApiError("dns_unavailable", 503, f"The webhook URL could not be checked: "
                        f"{exc.message}.", field="url", rule=exc.rule, retryAfter=5)
    return ApiError(exc.code, 422, f"Webhook URL refused: {exc.message}. Webhook URLs must "
                    "be public HTTPS (spec 5.5).", field="url", rule=exc.rule)


def check_url(url: str, app: App, checks: UrlChecks) -> CheckedUrl:
    """The text rules only (no DNS): cheap, run inside a transaction."""
    try:
        return check_webhook_url(url, checks.policy, app_slug=app.slug,
                                 runtime_active=app.runtime_served)
    except UrlRefused as exc:
        raise url_error(exc) from None


def resolve_url(checked: CheckedUrl, checks: UrlChecks) -> None:
    """The DNS rule: every answer must be an allowed address. Blocking; no transaction."""
    try:
        resolve_checked(checked, checks.policy, checks.resolver)
    except UrlRefused as exc:
        raise url_error(exc) from None


def parse_events(value: Sequence[str] | None, *, default: Sequence[str] | None) -> list[str]:
    if value is None:
        if default is None:
            raise ApiError("missing_field", 422, "'events' is required.", field="events")
        return list(default)
    events = list(dict.fromkeys(v.strip() for v in value))
    unknown = [e for e in events if e not in EVENT_TYPES]
    if unknown or not events:
        raise ApiError("invalid_events", 422, "'events' must list one or more of "
                       f"{', '.join(EVENT_TYPES)}.", field="events")
    return events


def endpoint_of(session: Session, app: App, ref: str | None = None, *,
                lock: bool = False) -> WebhookEndpoint:
    """The app's endpoint; ``lock``: its row locked until commit (PostgreSQL), read as the
    last writer left it, for a change that depends on what the caller saw."""
    query = select(WebhookEndpoint).where(WebhookEndpoint.app_id == app.id)
    if lock:
        query = query.with_for_update().execution_options(populate_existing=True)
    endpoint = session.scalar(query)
    if endpoint is None or (ref is not None and endpoint.id != ref):
        raise ApiError("webhook_not_found", 404, f"No webhook endpoint "
                       f"{repr(ref) + ' ' if ref else ''}on app '{app.slug}'.")
    return endpoint


def create_endpoint(session: Session, app: App, checked: CheckedUrl, events: list[str],
                    box: SecretBox, now: datetime) -> Created:
    existing = session.scalar(select(WebhookEndpoint.id).where(WebhookEndpoint.app_id == app.id))
    if existing is not None:
        raise ApiError("webhook_exists", 409, f"App '{app.slug}' already has its one webhook "
                       f"endpoint ({existing}); change it instead.", webhookId=existing)
    endpoint_id = new_id(IdPrefix.WEBHOOK)
    secret = new_signing_secret()
    endpoint = WebhookEndpoint(
        id=endpoint_id, app_id=app.id, url=checked.url, events=events,
        status=EndpointStatus.ENABLED, secret_sealed=box.seal(secret, endpoint_id),
        secret_preview=preview(secret), secret_created_at=now, created_at=now, updated_at=now)
    session.add(endpoint)
    try:
        session.flush()  # the unique app_id decides a race between two creations
    except IntegrityError:
        raise ApiError("webhook_exists", 409, f"App '{app.slug}' already has its one webhook "
                       "endpoint; change it instead.") from None
    return Created(endpoint, secret)


def update_endpoint(endpoint: WebhookEndpoint, *, checked: CheckedUrl | None,
                    events: list[str] | None, enabled: bool | None, now: datetime) -> None:
    if checked is not None:
        endpoint.url = checked.url
    if events is not None:
        endpoint.events = events
    if enabled is not None:
        endpoint.status = EndpointStatus.ENABLED if enabled else EndpointStatus.DISABLED
    endpoint.updated_at = now


def rotate_secret(endpoint: WebhookEndpoint, box: SecretBox, now: datetime) -> str:
    """A new secret, effective for every request from now on (retries included); the old
    one stops being used at once, so receivers should accept both while they deploy."""
    secret = new_signing_secret()
    endpoint.secret_sealed = box.seal(secret, endpoint.id)
    endpoint.secret_preview = preview(secret)
    endpoint.secret_created_at = now
    endpoint.updated_at = now
    return secret
