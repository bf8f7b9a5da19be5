"""Webhook signing secrets: made, sealed at rest, shown once (spec 5.6, 8 item 7).

The dispatcher needs the secret itself to compute an HMAC, so it cannot be stored hashed
like API keys. It is sealed with AES-256-GCM under a key derived from the server secret
(``SVCSRV_SECRET_KEY``), which lives in the environment and never in the database: a dump
or a backup of the database alone does not reveal any signing secret. The endpoint id is
the associated data, so a sealed secret copied onto another endpoint does not open.
Changing the server secret makes existing secrets unreadable: rotate every endpoint then.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from payments.ids import IdPrefix

_VERSION = "v1"
_KEY_LABEL = b"svc webhook signing secrets v1"


class SecretUnreadable(Exception):
    """A sealed secret does not open with this server secret (changed, or tampered)."""


def new_signing_secret() -> str:
    """``zwhsec_`` + 256 random bits as hex."""
    return IdPrefix.WEBHOOK_SECRET.value + secrets.token_hex(32)


def preview(secret: str) -> str:
    """What lists show instead of the secret: the prefix and its last four characters."""
    return f"{IdPrefix.WEBHOOK_SECRET.value}…{secret[-4:]}"


class SecretBox:
    """Seals and opens signing secrets with the key derived from the server secret."""

    def __init__(self, server_secret: str) -> None:
        key = hmac.new(server_secret.encode("utf-8"), _KEY_LABEL, hashlib.sha256).digest()
        self._aead = AESGCM(key)

    def seal(self, secret: str, endpoint_id: str) -> str:
        nonce = secrets.token_bytes(12)
        sealed = self._aead.encrypt(nonce, secret.encode("utf-8"), endpoint_id.encode("ascii"))
        return f"{_VERSION}:" + base64.urlsafe_b64encode(nonce + sealed).decode("ascii")

    def open(self, sealed: str, endpoint_id: str) -> str:
        version, _, data = sealed.partition(":")
        if version != _VERSION:
            raise SecretUnreadable(f"unknown sealing version {version!r}")
        raw = base64.urlsafe_b64decode(data.encode("ascii"))
        try:
            plain = self._aead.decrypt(raw[:12], raw[12:], endpoint_id.encode("ascii"))
        except InvalidTag:
            raise SecretUnreadable("the signing secret does not open with this server "
                                   "secret; rotate it") from None
        return plain.decode("utf-8")
