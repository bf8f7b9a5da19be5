"""Wire shapes of endpoints, attempts and tries. No secret, signature or header ever."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from payments.ledger.models import AttemptStatus, WebhookAttempt, WebhookEvent
from payments.webhooks.models import WebhookEndpoint, WebhookTry


def iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def endpoint_view(endpoint: WebhookEndpoint, skipped_while_disabled: int) -> dict[str, Any]:
    """``skipped_while_disabled``: ``outbox.count_skipped_while_disabled``, counted by the
    caller (a view does no I/O)."""
    return {
        "id": endpoint.id, "appId": endpoint.app_id, "url": endpoint.url,
        "events": list(endpoint.events), "status": endpoint.status.value,
        "secretPreview": endpoint.secret_preview,
        "secretCreatedAt": iso(endpoint.secret_created_at),
        "createdAt": iso(endpoint.created_at), "updatedAt": iso(endpoint.updated_at),
        "skippedWhileDisabled": skipped_while_disabled,
    }


def attempt_view(attempt: WebhookAttempt, event: WebhookEvent) -> dict[str, Any]:
    pending = attempt.status == AttemptStatus.PENDING
    queued = attempt.queued_behind if pending else None  # due once that one is answered
    delivery = event.payload.get("delivery") or {}
    return {
        "id": attempt.id, "eventId": event.id, "type": event.type,
        "test": event.payload.get("test") is True, "deliveryId": delivery.get("deliveryId"),
        "status": attempt.status.value, "attemptCount": attempt.attempt_count,
        "responseStatus": attempt.response_status, "signed": attempt.signed,
        "lastError": attempt.last_error,
        "nextAttemptAt": iso(attempt.next_attempt_at) if pending and not queued else None,
        "inFlight": pending and attempt.claim_token is not None,
        "queuedBehind": queued,
        "endpointId": attempt.endpoint_id, "deliveredAt": iso(attempt.delivered_at),
        "createdAt": iso(event.created_at), "updatedAt": iso(attempt.updated_at),
    }


def try_view(row: WebhookTry) -> dict[str, Any]:
    return {"number": row.number, "responseStatus": row.response_status, "error": row.error,
            "signed": row.signed, "durationMs": row.duration_ms, "sentAt": iso(row.sent_at),
            "endpointId": row.endpoint_id}
