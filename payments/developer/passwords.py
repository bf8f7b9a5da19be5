"""Password hashing with argon2id."""

from __future__ import annotations

import base64
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from argon2.low_level import ARGON2_VERSION

from payments.errors import ApiError

MIN_LENGTH = 10
MAX_LENGTH = 256


class Passwords:
    def __init__(self, hasher: PasswordHasher | None = None) -> None:
        self._hasher = hasher or PasswordHasher()
        # Verifying against this when the account does not exist keeps the time of a
        # failed log-in independent of whether the login name is registered.
        self._dummy = _dummy_hash(self._hasher)

    def hash(self, password: str) -> str:
        check_password_policy(password)
        return self._hasher.hash(password)

    def verify(self, stored: str | None, password: str) -> bool:
        try:
            return self._hasher.verify(stored or self._dummy, password) and stored is not None
        except (VerificationError, InvalidHashError):
            return False


def _dummy_hash(hasher: PasswordHasher) -> str:
    """An encoded argon2 hash with ``hasher``'s parameters, random salt and random digest:
    verifying against it costs what verifying a real one does (the cost is in the
    parameters), and it matches no password. Made without hashing: a hash cost about 0.17
    s of CPU (argon2id's defaults) at every service built, in every server process at its
    start (bench/startup_bench.py) and hundreds of times in the tests."""
    def encoded(size: int) -> str:
        return base64.b64encode(secrets.token_bytes(size)).decode().rstrip("=")

    return (f"$argon2{hasher.type.name.lower()}$v={ARGON2_VERSION}$m={hasher.memory_cost},"
            f"t={hasher.time_cost},p={hasher.parallelism}${encoded(hasher.salt_len)}"
            f"${encoded(hasher.hash_len)}")


def check_password_policy(password: str) -> None:
    if not MIN_LENGTH <= len(password) <= MAX_LENGTH:
        raise ApiError("weak_password", 422, f"Use a password of {MIN_LENGTH} to {MAX_LENGTH} "
                       "characters.")
    if password.strip() == "" or len(set(password)) < 4:
        raise ApiError("weak_password", 422, "That password is too easy to guess; use more "
                       "varied characters.")
