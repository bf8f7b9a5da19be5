"""The request a receiver gets: body bytes, headers of spec 6, signature of ARCHITECTURE.md.

``x-svc-signature: sha256=<hex HMAC-SHA256(secret, x-svc-timestamp + "." + raw body)>``,
the key being the whole ``zwhsec_...`` string as UTF-8. ``svc.webhooks`` verifies the same
construction on the receiver's side; a test checks the two agree byte for byte.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

USER_AGENT = "svc-webhooks/1"


def event_body(payload: dict[str, Any]) -> bytes:
    """Compact JSON, UTF-8; the same event gives the same bytes on every retry."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def timestamp(now: datetime) -> str:
    """ISO 8601 in UTC to the second (spec 5.6), e.g. ``2026-11-22T10:00:00Z``."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def signature(secret: str, stamp: str, body: bytes) -> str:
    mac = hmac.new(secret.encode("utf-8"), stamp.encode("ascii") + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def request_headers(payload: dict[str, Any], body: bytes, secret: str,
                    now: datetime) -> dict[str, str]:
    """The headers of one delivery. The signature covers exactly ``body``."""
    delivery = payload.get("delivery") or {}
    stamp = timestamp(now)
    return {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "x-svc-event": str(payload["type"]),
        "x-svc-event-id": str(payload["id"]),
        "x-svc-delivery-id": header_value(str(delivery.get("deliveryId", ""))),
        "x-svc-idempotency-key": header_value(str(delivery.get("idempotencyKey", ""))),
        "x-svc-timestamp": stamp,
        "x-svc-signature": signature(secret, stamp, body),
    }


def header_value(text: str) -> str:
    """``text`` if it is printable ASCII, else percent-encoded (UTF-8): an idempotency key may
    hold any character, a header may not. The body always carries the exact value."""
    if all(" " <= c <= "~" for c in text) and "%" not in text:
        return text
    return quote(text, safe="".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%"))
