"""Proxy rules against a real aiohttp origin on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from aiohttp import web
from sqlalchemy.orm import Session, sessionmaker

from tests.factories import add_app
from tests.router.conftest import RouterFactory
from tests.support.servers import AiohttpServer


async def echo(request: web.Request) -> web.Response:
    body = await request.read()
    response = web.json_response({
        "method": request.method, "path_qs": request.raw_path,
        "headers": [[k.lower(), v] for k, v in request.headers.items()],
        "body_len": len(body),
    })
    response.set_cookie("origin_session", "abc")
    response.headers["X-Origin"] = "yes"
    return response


@pytest.fixture
def origin() -> Iterator[AiohttpServer]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    with AiohttpServer(app) as server:
        yield server


def test_cookies_stripped_both_ways(start_proxy_router: RouterFactory, origin: AiohttpServer,
                                    proxy_sessions: sessionmaker[Session]) -> None:
    add_app(proxy_sessions, "game", origin.url)
    with start_proxy_router() as router, router.client("game") as client:
        response = client.get("/echo?x=1&y=%2F", headers={"cookie": "sid=secret"})
    assert response.status_code == 200
    seen = dict(response.json()["headers"])
    assert "cookie" not in seen
    assert "set-cookie" not in response.headers
    assert response.headers["x-origin"] == "yes"
    assert response.json()["path_qs"] == "/echo?x=1&y=%2F"
