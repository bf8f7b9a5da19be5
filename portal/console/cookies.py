"""The console's two cookies. Neither has a Domain attribute: they are host-only, so they
never reach the API, portal or runtime hosts; over https they are ``__Host-`` named, so no
other host can plant one either (payments/cookies.py)."""

from __future__ import annotations

from starlette.responses import Response

from payments.cookies import CookieNames
from payments.developer.auth import SESSION_COOKIE
from portal.console.csrf import CSRF_COOKIE


def set_session_cookie(response: Response, cookies: CookieNames, token: str, *,
                       max_age: int) -> None:
    # Lax, not Strict: a link from the CLI or an email must arrive signed in; every
    # mutation is a POST, which Lax does not send cross-site, and carries a CSRF token.
    cookies.set(response, SESSION_COOKIE, token, max_age=max_age, samesite="lax")


def clear_session_cookie(response: Response, cookies: CookieNames) -> None:
    cookies.clear(response, SESSION_COOKIE, samesite="lax")


def set_csrf_cookie(response: Response, cookies: CookieNames, token: str) -> None:
    cookies.set(response, CSRF_COOKIE, token, samesite="strict")
