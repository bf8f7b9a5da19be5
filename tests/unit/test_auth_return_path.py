"""Which paths are the service's /svc-auth-return (router/auth_return_path.py): the one rule
the fast path and the ASGI path, HTTP and WebSocket, both ask (spec 4.7, docs/router.md)."""

from __future__ import annotations

import pytest
from starlette.types import Scope

from router.auth_return_path import is_auth_return_path
from router.runtime_host import is_auth_return

# Paths as uvicorn and the fast protocol give them: decoded, without the query.
OURS = ["/svc-auth-return", "/svc-auth-return/", "/svc-auth-return//",
        # A fragment is no part of the path: the WebSocket path leaves a raw one in, and
        # the origin would be asked for /svc-auth-return without it. %23 decodes alike.
        "/svc-auth-return#x", "/svc-auth-return/#x", "/svc-auth-return#", "/svc-auth-return#/a",
        "/svc-auth-return//#x?app=game"]
THE_ORIGINS = [
    "/", "", "/svc-auth-returned", "/svc-auth-return/x", "/svc-auth-return.html",
    "/x/svc-auth-return", "//svc-auth-return", "/SVC-AUTH-RETURN", "/Svc-Auth-Return",
    "/svc-auth-return ", "/svc-auth-return;x", "/svc-auth-return\\",
    "/svc-auth-return%2D",  # what "%252D" decodes to: not ours
    "/svc-auth-return/x#", "/svc-auth-returned#x", "/svc-auth-retur#n",
]


@pytest.mark.parametrize("path", OURS)
def test_the_auth_return_path_in_every_spelling(path: str) -> None:
    assert is_auth_return_path(path)


@pytest.mark.parametrize("path", THE_ORIGINS)
def test_other_paths_are_the_origins(path: str) -> None:
    assert not is_auth_return_path(path)


@pytest.mark.parametrize("path", OURS + THE_ORIGINS)
@pytest.mark.parametrize("kind", ["http", "websocket"])
def test_the_asgi_path_asks_the_same_rule(path: str, kind: str) -> None:
    scope: Scope = {"type": kind, "path": path, "query_string": b"app=game&code=c"}
    assert is_auth_return(scope) is is_auth_return_path(path)
