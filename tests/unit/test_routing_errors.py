"""Starlette's own 404/405 in the envelope say what was asked, so a wrong base URL shows."""

from __future__ import annotations

import asyncio
import json

from starlette.exceptions import HTTPException
from starlette.requests import Request

from payments.errors import handle_http_exception


def answer(method: str, path: str, exc: HTTPException) -> tuple[int, dict[str, str]]:
    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(),
             "query_string": b"", "headers": [(b"host", b"api.localhost:8000")],
             "scheme": "http", "server": ("127.0.0.1", 8000)}
    response = asyncio.run(handle_http_exception(Request(scope), exc))
    return response.status_code, json.loads(bytes(response.body))


def test_a_route_that_is_not_there_names_method_and_path() -> None:
    status, body = answer("POST", "/api/api/orders", HTTPException(404))
    assert status == 404 and body["code"] == "not_found"
    assert "POST /api/api/orders" in body["message"]
    assert "API host" in body["message"]


def test_a_wrong_method_names_it() -> None:
    status, body = answer("DELETE", "/api/orders", HTTPException(405))
    assert (status, body["code"]) == (405, "method_not_allowed")
    assert body["message"] == "DELETE is not allowed on /api/orders."


def test_a_long_path_is_cut_and_a_detail_given_is_kept() -> None:
    _, body = answer("GET", "/" + "a" * 5000, HTTPException(404))
    assert len(body["message"]) < 400 and "/" + "a" * 199 + "…" in body["message"]
    _, kept = answer("GET", "/x", HTTPException(404, detail="No such thing."))
    assert kept["message"] == "No such thing."
