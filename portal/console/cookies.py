"""The console's two cookies. Neither has a Domain attribute: they are host-only, so they
never reach the API, portal or runtime hosts."""

from __future__ import annotations

from starlette.responses import Response

from payments.developer.auth import SESSION_COOKIE
from portal.console.csrf import CSRF_COOKIE


def set_session_cookie(response: Response, token: str, *, secure: bool,
                       max_age: int) -> None:
    # Lax, not Strict: a link from the CLI or an email must arrive signed in; every
    # mutation is a POST, which Lax does not send cross-site, and carries a CSRF token.
    response.set_cookie(SESSION_COOKIE, token, max_age=max_age, path="/", secure=secure,
                        httponly=True, samesite="lax")


def clear_session_cookie(response: Response, *, secure: bool) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/", secure=secure, httponly=True,
                           samesite="lax")


def set_csrf_cookie(response: Response, token: str, *, secure: bool) -> None:
    response.set_cookie(CSRF_COOKIE, token, path="/", secure=secure, httponly=True,
                        samesite="strict")
