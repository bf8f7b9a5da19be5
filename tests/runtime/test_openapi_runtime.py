"""The runtime operations are described in the OpenAPI document, errors included."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.routing import Route

from payments.openapi import openapi_document
from payments.runtime.openapi import AUTH_CODES, RUNTIME_ERRORS
from router.app import create_app
from router.hosts import HostKind
from router.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_every_runtime_route_and_method_is_described() -> None:
    api = create_app(Settings()).hosts[HostKind.API]
    routes = {(r.path, m.lower()) for r in api.routes  # type: ignore[attr-defined]
              if isinstance(r, Route) and "/runtime" in r.path
              for m in (r.methods or ()) if m != "HEAD"}
    assert len(routes) == 5
    paths = openapi_document("http://api.localhost:8000")["paths"]
    for path, method in routes:
        assert method in paths[path], (method, path)


def test_every_error_the_runtime_raises_is_described() -> None:
    raised = set()
    for name in ("api.py", "operations.py", "states.py"):
        text = (ROOT / "payments" / "runtime" / name).read_text()
        raised |= set(re.findall(r'ApiError\(\s*"([^"]+)",\s*\d{3}', text))
    described = {c for codes in (*AUTH_CODES.values(), *RUNTIME_ERRORS.values()) for c in codes}
    assert raised, "found no errors: the pattern is stale"
    assert raised - described == set()
    paths = openapi_document("http://api.localhost:8000")["paths"]
    verify = paths["/api/developer/apps/{app}/runtime/verify"]["post"]["responses"]
    assert verify["422"]["content"]["application/json"]["schema"]["properties"]["code"][
        "enum"] == ["runtime_verification_failed"]
