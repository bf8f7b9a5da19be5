"""Which request paths are the service's ``/svc-auth-return`` (spec 4.7).

The one definition every path asks: the ASGI path for HTTP and WebSocket
(``router/runtime_host.py``) and the fast path (``router/fast_path.py``). Compiled with
the fast path's modules (``router.native.MODULES``), so the fast path's call to it is a
call between compiled functions, no dearer than the comparison written inline.
"""

from __future__ import annotations

AUTH_RETURN_PATH = "/svc-auth-return"
_LENGTH = len(AUTH_RETURN_PATH)


def is_auth_return_path(path: str) -> bool:
    """Whether a decoded request path (``%2D`` is ``-``, as uvicorn and the fast protocol
    give it) is ``/svc-auth-return``, with any trailing slashes and any fragment.

    The HTTP paths never see a fragment (httptools leaves it out of the path), but
    uvicorn's WebSocket protocol splits a target at ``?`` alone and keeps a raw ``#`` in
    the path, where aiohttp drops it on the way to the origin: an upgrade to
    ``/svc-auth-return#x`` reached the origin's ``/svc-auth-return``. So ``#`` ends the
    path here, on every path alike; a decoded ``%23`` too, which only keeps the origin
    from paths it would read as ``/svc-auth-return#...``.
    """
    if not path.startswith(AUTH_RETURN_PATH):
        return False
    rest = path[_LENGTH:].lstrip("/")
    return not rest or rest[0] == "#"
