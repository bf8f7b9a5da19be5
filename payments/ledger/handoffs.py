"""Account handoffs (spec 4.5, 3.5): stateless signed tokens, and scoped user hashes."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from payments.errors import ApiError
from payments.http import field_str, required_str
from payments.ledger.permits import ADDRESS_RE


def merchant_user_hash(secret_key: str, app_id: str, merchant_user_id: str) -> str:
    """The stored form of ``merchantUserId``: an HMAC scoped to the app, never the raw id."""
    message = f"merchant-user:{app_id}:{merchant_user_id}".encode()
    return hmac.new(secret_key.encode(), message, hashlib.sha256).hexdigest()


def made_for(secret_key: str, app_id: str, connection_user_hash: str,
             developer_user_id: str) -> bool:
    """Whether a connection stored as ``connection_user_hash`` was made by a handoff for
    ``developer_user_id`` (the same string the backend sent as ``merchantUserId``)."""
    return hmac.compare_digest(merchant_user_hash(secret_key, app_id, developer_user_id),
                               connection_user_hash)


def merchant_user_id_of(body: dict[str, Any]) -> str:
    """``merchantUserId``: a blank one is refused, since every player sent with it would
    hash to the same user and share one connection (and its budget)."""
    value = required_str(body, "merchantUserId", 200)
    if not value.strip():
        raise ApiError("invalid_field", 422, "'merchantUserId' must name the player's account "
                       "in your app (a stable id, not blank).", field="merchantUserId")
    return value


def wallet_hint_of(body: dict[str, Any]) -> str | None:
    """``walletHint``, optional: when given it is an address, since it is passed on in the
    portal URL and shown to the player as the wallet the app expects."""
    value = field_str(body, "walletHint", required=False, max_length=42)
    if value is not None and not ADDRESS_RE.fullmatch(value):
        raise ApiError("invalid_field", 422, "'walletHint' must be a wallet address (0x and 40 "
                       "hex digits), or left out.", field="walletHint")
    return value


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
