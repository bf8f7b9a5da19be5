"""The OpenAPI description covers every route of the API host."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import Route

from payments.openapi import openapi_document
from router.app import create_app
from router.hosts import HostKind
from router.settings import Settings


def test_every_api_route_is_described() -> None:
    service = create_app(Settings())
    api = service.hosts[HostKind.API]
    assert isinstance(api, Starlette)
    routes = {r.path for r in api.routes if isinstance(r, Route)}
    document = openapi_document("http://api.localhost:8000")
    assert document["openapi"] == "3.1.0"
    assert routes
    assert routes <= set(document["paths"])


def test_every_developer_route_of_the_console_host_is_described() -> None:
    """Some routes live on the console host only (a console session's, such as the
    organization keys); they are described all the same, as console-session-only."""
    service = create_app(Settings())
    console = service.hosts[HostKind.CONSOLE]
    assert isinstance(console, Starlette)
    document = openapi_document("http://api.localhost:8000")
    routes = [r for r in console.routes if isinstance(r, Route)
              and r.path.startswith("/api/developer/")]
    for route in routes:
        for method in (route.methods or set()) - {"HEAD"}:
            assert method.lower() in document["paths"].get(route.path, {}), \
                f"{method} {route.path}"
    for path in ("/api/developer/keys", "/api/developer/keys/{key}",
                 "/api/developer/keys/{key}/revoke"):
        assert path in {r.path for r in routes}
        for operation in document["paths"][path].values():
            if isinstance(operation, dict):
                assert operation["security"] == [{"consoleSession": []}], path
