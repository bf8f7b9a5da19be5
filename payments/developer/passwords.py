"""Password hashing with argon2id."""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

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


# One dummy hash per set of parameters and process: hashing one costs about 0.17 s of CPU
# (argon2id's defaults), paid at every service built otherwise (the tests build hundreds).
_DUMMIES: dict[tuple[object, ...], str] = {}


def _dummy_hash(hasher: PasswordHasher) -> str:
    key = (hasher.time_cost, hasher.memory_cost, hasher.parallelism, hasher.hash_len,
           hasher.salt_len, hasher.type)
    found = _DUMMIES.get(key)
    if found is None:
        found = _DUMMIES[key] = hasher.hash("not-a-real-password")
    return found


def check_password_policy(password: str) -> None:
    if not MIN_LENGTH <= len(password) <= MAX_LENGTH:
        raise ApiError("weak_password", 422, f"Use a password of {MIN_LENGTH} to {MAX_LENGTH} "
                       "characters.")
    if password.strip() == "" or len(set(password)) < 4:
        raise ApiError("weak_password", 422, "That password is too easy to guess; use more "
                       "varied characters.")
