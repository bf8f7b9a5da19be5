"""The portal's and console's cookies: their names, and how they are set, cleared and read.

Served over https (``Settings.secure_cookies``) every one of them is Secure and named
``__Host-<name>``. A browser stores a ``__Host-`` cookie only when it is Secure, has
``Path=/`` and no ``Domain``, so no other host can set one for the portal's or console's
host: a runtime's script on ``<slug>.{apps_domain}`` under the same registrable domain can
still write ``document.cookie = "svc_console=...; Domain=example.com"`` (cookie tossing,
which the router cannot strip), but that plain name is never read then. In dev over http
the plain names stay: a Secure cookie sent over http is not kept by every client.
docs/decisions.md, "`__Host-` cookie names".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from starlette.requests import HTTPConnection
from starlette.responses import Response

HOST_PREFIX = "__Host-"
SameSite = Literal["lax", "strict"]


@dataclass(frozen=True)
class CookieNames:
    """Built once from the settings (``Settings.cookies``); nothing else picks a name."""

    secure: bool

    def name(self, base: str) -> str:
        """The cookie name for ``base`` (``svc_console``...): prefixed when Secure."""
        return HOST_PREFIX + base if self.secure else base

    def read(self, request: HTTPConnection, base: str) -> str | None:
        # Only the one name: when Secure, a plain-named cookie is exactly what another host
        # of the registrable domain could have planted, so it is ignored.
        return request.cookies.get(self.name(base))

    def set(self, response: Response, base: str, value: str, *, samesite: SameSite,
            max_age: int | None = None) -> None:
        # Path=/ and no Domain always: the prefix's rules, and host-only in dev too.
        response.set_cookie(self.name(base), value, max_age=max_age, path="/",
                            secure=self.secure, httponly=True, samesite=samesite)

    def clear(self, response: Response, base: str, *, samesite: SameSite) -> None:
        response.delete_cookie(self.name(base), path="/", secure=self.secure, httponly=True,
                               samesite=samesite)
