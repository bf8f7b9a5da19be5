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
