"""CSRF before log-in: a double-submit cookie matched against a hidden field.

After log-in the session row's own token is used (``payments.developer.auth.check_csrf``).
Both refuse a cross-origin ``Origin``; browsers send one on every form post.
"""

from __future__ import annotations

import secrets

from payments.developer.tokens import same
from payments.errors import ApiError

CSRF_COOKIE = "svc_csrf"  # the base name; `__Host-svc_csrf` over https (payments/cookies.py)
CSRF_FIELD = "csrf"


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def check_double_submit(cookie: str | None, field: str | None, origin: str | None,
                        console_origin: str) -> None:
    if origin is not None and origin != console_origin:
        raise ApiError("csrf_failed", 403, "Cross-origin requests to the console are refused.")
    if not cookie or not field or not same(cookie, field):
        raise ApiError("csrf_failed", 403, "This form expired or was not sent from the "
                       "console; reload the page and try again.")


def is_local_path(path: str) -> bool:
    """Where to go after log-in: only a path on this host, never ``//host`` or ``/\\host``."""
    return (path.startswith("/") and not path.startswith("//") and "\\" not in path
            and path.isprintable())
