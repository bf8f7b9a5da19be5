"""Who the player is: a signed session token, the stand-in for the game's own login.

The router strips cookies on the runtime host (spec 1.2 rule 2, 5.7), so the session is a
bearer token the page keeps in ``localStorage`` and sends as ``Authorization: Bearer``. It
is ``base64url(JSON {u, n, e}) + "." + base64url(HMAC-SHA256(key, payload))``; the key is
derived from the webhook signing secret, the one server-side secret every deployment has.
Grants and charges use the token's user id, never a ``developerUserId`` sent by the page.

"Log in as <name>" with no password is a demo login: a real game puts its own account
system here and keeps the rest.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import time
from dataclasses import dataclass

SESSION_SECONDS = 7 * 24 * 3600
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,39}\Z")


class SessionError(ValueError):
    """No valid session: the page must log in again."""


@dataclass(frozen=True)
class Player:
    user_id: str  # the developerUserId the service and the store see
    name: str  # the game account label shown in the portal

    def view(self) -> dict[str, str]:
        return {"developerUserId": self.user_id, "name": self.name}


def user_id_for(name: str) -> str:
    if not _NAME.match(name):
        raise SessionError("A player name is 1-40 letters, digits, spaces, '.', '_' or '-'.")
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "player"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SessionSigner:
    def __init__(self, server_secret: str) -> None:
        self._key = hmac.new(server_secret.encode(), b"reference-app:player-session",
                             hashlib.sha256).digest()

    def _mac(self, payload: str) -> str:
        return _b64(hmac.new(self._key, payload.encode("ascii"), hashlib.sha256).digest())

    def issue(self, name: str, now: float | None = None) -> tuple[Player, str]:
        player = Player(user_id_for(name), name)
        expires = int((time.time() if now is None else now) + SESSION_SECONDS)
        payload = _b64(json.dumps({"u": player.user_id, "n": name, "e": expires},
                                  separators=(",", ":")).encode())
        return player, f"{payload}.{self._mac(payload)}"

    def read(self, token: str, now: float | None = None) -> Player:
        payload, _, mac = token.partition(".")
        if not payload or not mac or not hmac.compare_digest(self._mac(payload), mac):
            raise SessionError("The session token is not valid.")
        try:
            data = json.loads(_unb64(payload))
            player = Player(str(data["u"]), str(data["n"]))
            expires = int(data["e"])
        except (ValueError, KeyError, TypeError):
            raise SessionError("The session token is not valid.") from None
        if expires < (time.time() if now is None else now):
            raise SessionError("The session expired: log in again.")
        return player
