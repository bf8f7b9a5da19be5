"""Account handoffs (spec 4.5, 3.5): stateless signed tokens, and scoped user hashes."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import UTC, datetime

from payments.errors import ApiError


def merchant_user_hash(secret_key: str, app_id: str, merchant_user_id: str) -> str:
    """The stored form of ``merchantUserId``: an HMAC scoped to the app, never the raw id."""
    message = f"merchant-user:{app_id}:{merchant_user_id}".encode()
    return hmac.new(secret_key.encode(), message, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Handoff:
    app_id: str
    merchant_user_hash: str
    label: str
    expires_at: datetime


def _sign(secret_key: str, body: bytes) -> str:
    digest = hmac.new(secret_key.encode(), b"handoff:" + body, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def encode_handoff(secret_key: str, handoff: Handoff) -> str:
    body = json.dumps({"a": handoff.app_id, "m": handoff.merchant_user_hash,
                       "l": handoff.label, "e": int(handoff.expires_at.timestamp())},
                      separators=(",", ":")).encode()
    encoded = base64.urlsafe_b64encode(body).decode().rstrip("=")
    return f"{encoded}.{_sign(secret_key, body)}"


def decode_handoff(secret_key: str, token: str, now: datetime) -> Handoff:
    try:
        encoded, signature = token.split(".", 1)
        body = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        if not hmac.compare_digest(signature, _sign(secret_key, body)):
            raise ValueError("bad signature")
        data = json.loads(body)
        handoff = Handoff(str(data["a"]), str(data["m"]), str(data["l"]),
                          datetime.fromtimestamp(int(data["e"]), UTC))
    except (ValueError, KeyError, TypeError):
        raise ApiError("handoff_invalid", 422, "The account handoff is not valid; ask the app "
                       "to start again.") from None
    if handoff.expires_at <= now:
        raise ApiError("handoff_expired", 410, "The account handoff expired; ask the app to "
                       "start again.")
    return handoff
