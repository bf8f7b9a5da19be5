"""CSRF for the portal's JSON endpoints: the exact portal ``Origin`` plus a token.

Before a wallet is proven the token is a signed page token (HMAC, 2 hours), minted into
each page; it needs no cookie, so the authorize page also works inside a runtime's iframe
where the portal's cookies may be third-party. After the proof, the session's own token
is required. Bodies must be ``application/json``, which a cross-site form cannot send and
a cross-origin ``fetch`` only after a preflight we never grant.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import datetime, timedelta

from starlette.requests import Request

from payments.digits import parse_digits
from payments.errors import ApiError

PAGE_TOKEN_TTL = timedelta(hours=2)
HEADER = "x-csrf-token"


def _mac(secret_key: str, expiry: int) -> str:
    digest = hmac.new(secret_key.encode(), f"portal-page:{expiry}".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(digest.digest()).decode().rstrip("=")


def page_token(secret_key: str, now: datetime) -> str:
    expiry = int((now + PAGE_TOKEN_TTL).timestamp())
    return f"{expiry}.{_mac(secret_key, expiry)}"


def check_origin(request: Request, portal_origin: str) -> None:
    if request.headers.get("origin") != portal_origin:
        raise ApiError("csrf_failed", 403, "Only the portal's own pages may call this.")


def check_page_token(request: Request, secret_key: str, portal_origin: str,
                     now: datetime) -> None:
    check_origin(request, portal_origin)
    token = request.headers.get(HEADER, "")
    text, _, mac = token.partition(".")
    expiry = parse_digits(text, 12)
    if expiry is None or not hmac.compare_digest(mac.encode(), _mac(secret_key, expiry).encode()):
        raise ApiError("csrf_failed", 403, "This page expired; reload it and try again.")
    if expiry <= now.timestamp():
        raise ApiError("csrf_failed", 403, "This page expired; reload it and try again.")


def check_session_token(request: Request, expected: str, portal_origin: str) -> None:
    check_origin(request, portal_origin)
    if not hmac.compare_digest(request.headers.get(HEADER, "").encode(), expected.encode()):
        raise ApiError("csrf_failed", 403, "This page expired; reload it and try again.")
