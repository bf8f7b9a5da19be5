"""Which request paths are the service's ``/svc-auth-return`` (spec 4.7).

The one definition every path asks: the ASGI path for HTTP and WebSocket
(``router/runtime_host.py``) and the fast path (``router/fast_path.py``). Compiled with
the fast path's modules (``router.native.MODULES``), so the fast path's call to it is a
call between compiled functions, no dearer than the comparison written inline.
"""

from __future__ import annotations

AUTH_RETURN_PATH = "/svc-auth-return"


def is_auth_return_path(path: str) -> bool:
    """Whether a decoded request path (``%2D`` is ``-``, as uvicorn and the fast protocol
    give it) is ``/svc-auth-return``, with any trailing slashes."""
    return path.rstrip("/") == AUTH_RETURN_PATH
