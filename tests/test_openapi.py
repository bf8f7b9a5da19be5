"""The OpenAPI description covers every route of the API host."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import Route

from payments.developer.openapi import CONSOLE_ONLY_PATHS
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


def test_the_console_only_routes_name_the_console_as_their_server() -> None:
    service = create_app(Settings())
    api = service.hosts[HostKind.API]
    assert isinstance(api, Starlette)
    api_paths = {r.path for r in api.routes if isinstance(r, Route)}
    document = openapi_document("http://api.localhost:8000",
                                console_url="http://console.localhost:8000")
    for path in CONSOLE_ONLY_PATHS:
        assert path not in api_paths, path  # the API host would answer 404
        assert document["paths"][path]["servers"] == [
            {"url": "http://console.localhost:8000", "description": "the console host"}]
    assert all("servers" not in document["paths"][path] for path in api_paths
               if path in document["paths"])
