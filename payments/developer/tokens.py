"""Random secrets and their stored hashes.

Tokens here carry 128+ random bits, so a plain SHA-256 is enough to store them: there is
nothing to brute-force. Passwords are the exception and use argon2 (passwords.py).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

# No 0/O, 1/I/L: user codes are read off one screen and typed into another.
_USER_CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token(prefix: str = "", nbytes: int = 32) -> str:
    return prefix + secrets.token_hex(nbytes)


def verification_code() -> str:
    return f"{secrets.randbelow(1_000_000):06d}"


def code_hash(owner: str, code: str) -> str:
    """A short code is hashed with its owner's id so equal codes never share a hash."""
    return hashlib.sha256(f"{owner}:{code}".encode()).hexdigest()


def user_code() -> str:
    raw = "".join(secrets.choice(_USER_CODE_ALPHABET) for _ in range(8))
    return f"{raw[:4]}-{raw[4:]}"


def normalize_user_code(text: str) -> str:
    raw = "".join(ch for ch in text.upper() if ch.isalnum())
    return f"{raw[:4]}-{raw[4:]}" if len(raw) == 8 else raw


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())
