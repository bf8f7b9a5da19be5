"""The portal's JSON endpoints are described in ``{docs_url}/openapi.json``, truthfully:
every route is there (on the portal server), and real answers, successes and errors, are
responses the description lists with bodies its schemas accept."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator
from sqlalchemy.orm import Session, sessionmaker
from starlette.applications import Starlette
from starlette.routing import Route

from payments.db import utcnow
from payments.openapi import openapi_document
from portal.csrf import page_token
from router.app import create_app
from router.hosts import HostKind
from router.settings import DEV_SECRET_KEY, Settings
from tests.ledger.flow import connect, sign_permit, wallet
from tests.portal.test_portal_api import prove
from tests.portal.wallet_world import Portal, portal_world
from tests.support.router import RouterFactory

SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def portal_api_routes(settings: Settings) -> set[str]:
    host = create_app(settings).hosts[HostKind.PORTAL]
    assert isinstance(host, Starlette)
    return {r.path for r in host.routes if isinstance(r, Route) and r.path.startswith("/api/")}


def test_every_portal_api_route_is_described_on_the_portal_server() -> None:
    dev = Settings()
    document = openapi_document(dev.base_url, dev.portal_url, dev=True)
    routes = portal_api_routes(dev)
    assert routes and routes <= set(document["paths"])
    for path in routes:
        assert document["paths"][path]["servers"] == [
            {"url": dev.portal_url, "description": "the portal host"}]
    production = Settings(mode="production", allow_private_origins=False,
                          base_url="https://api.example.com",
                          portal_url="https://portal.example.com",
                          console_url="https://console.example.com",
                          docs_url="https://docs.example.com", apps_scheme="https",
                          smtp_host="127.0.0.1", secret_key="k" * 40)
    prod_doc = openapi_document(production.base_url, production.portal_url, dev=False)
    prod_routes = portal_api_routes(production)
    assert not any("dev-wallet" in p for p in prod_routes)
    assert prod_routes == {p for p in prod_doc["paths"]
                           if prod_doc["paths"][p].get("servers", [{}])[0].get("url")
                           == production.portal_url}


@pytest.fixture
def portal(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[Portal]:
    with portal_world(start_router, sessions) as running:
        yield running


class Checker:
    def __init__(self, portal: Portal) -> None:
        with httpx.Client(base_url=portal.router.url, headers={
                "host": f"docs.localhost:{portal.router.port}"}) as docs:
            self.document: dict[str, Any] = docs.get("/openapi.json").json()
        self.portal = portal
        self.seen: set[tuple[str, str, str]] = set()

    def check(self, template: str, method: str, response: httpx.Response) -> None:
        operation = self.document["paths"][template][method]
        status = str(response.status_code)
        assert status in operation["responses"], (template, status, response.text)
        schema = operation["responses"][status]["content"]["application/json"]["schema"]
        validator = Draft202012Validator({**schema, "components": self.document["components"]})
        errors = [e.message for e in validator.iter_errors(response.json())]
        assert errors == [], (template, status, response.text, errors)
        self.seen.add((template, method, status))


@SQLITE_ONLY
def test_real_answers_match_the_description(portal: Portal) -> None:
    check = Checker(portal)
    owner = wallet(11)
    origin = portal.url
    token = page_token(DEV_SECRET_KEY, utcnow())
    c = httpx.Client(base_url=portal.router.url, headers={
        "host": f"portal.localhost:{portal.router.port}", "origin": origin,
        "x-csrf-token": token})
    p = "/api/portal"
    deadline = int((utcnow() + timedelta(days=3)).timestamp())
    with c:
        check.check(f"{p}/wallet", "get", c.get(f"{p}/wallet",
                                                params={"address": owner.address}))
        check.check(f"{p}/wallet", "get", c.get(f"{p}/wallet", params={"address": "x"}))
        for value in ("5000000", "0", "-"):
            check.check(f"{p}/permit", "get", c.get(f"{p}/permit", params={
                "owner": owner.address, "value": value, "deadline": deadline}))
        params = {"owner": owner.address, "app": "game", "returnUrl": f"{origin}/game"}
        check.check(f"{p}/owner-proof", "get", c.get(f"{p}/owner-proof", params=params))
        check.check(f"{p}/owner-proof", "get", c.get(f"{p}/owner-proof",
                                                     params={**params, "app": "zzz"}))
        check.check(f"{p}/owner-proof", "get", c.get(f"{p}/owner-proof",
                                                     params={**params, "returnUrl": "x"}))
        check.check(f"{p}/budget", "post", c.post(f"{p}/budget", json={
            "permit": sign_permit(owner, 3_000_000)}))
        check.check(f"{p}/budget", "post", c.post(f"{p}/budget", json={
            "permit": sign_permit(owner, 3_000_000)}))  # same nonce again: stale
        check.check(f"{p}/budget", "post", c.post(f"{p}/budget", json={"permit": 1}))
        check.check(f"{p}/budget", "post", c.post(f"{p}/budget", content=b"[]",
                                                  headers={"content-type": "text/plain"}))
        check.check(f"{p}/owner-proof", "get", c.get(f"{p}/owner-proof", params=params))
        check.check(f"{p}/wallet", "get", c.get(f"{p}/wallet",
                                                params={"address": owner.address}))
        challenge = c.post(f"{p}/wallet-proof/challenge", json={"address": owner.address})
        check.check(f"{p}/wallet-proof/challenge", "post", challenge)
        check.check(f"{p}/wallet-proof/challenge", "post",
                    c.post(f"{p}/wallet-proof/challenge", json={"address": 5}))
        check.check(f"{p}/wallet-proof", "post", c.post(f"{p}/wallet-proof", json={
            "challenge": "nope", "signature": "0x00"}))
        check.check(f"{p}/wallet-proof", "post", c.post(f"{p}/wallet-proof", json={}))
        check.check(f"{p}/account", "get", c.get(f"{p}/account"))
        check.check(f"{p}/wallet-proof/forget", "post", c.post(f"{p}/wallet-proof/forget",
                                                               json={}))
        check.check("/api/public/usdc-balance", "get", c.get(
            "/api/public/usdc-balance", params={"address": owner.address}))
        check.check("/api/public/usdc-balance", "get", c.get(
            "/api/public/usdc-balance", params={"address": "0x1"}))
        check.check(f"{p}/dev-wallet/account", "post", c.post(f"{p}/dev-wallet/account",
                                                              json={}))
        check.check(f"{p}/dev-wallet/sign", "post", c.post(f"{p}/dev-wallet/sign", json={
            "method": "x", "params": []}))
        check.check(f"{p}/dev-wallet/account", "post", c.post(
            f"{p}/dev-wallet/account", json={}, headers={"origin": "x"}))
    connect(portal.world, owner, "player-z", 4_000_000, nonce=1)
    session, view = prove(portal, owner)
    connection = view["connections"][0]["id"]
    try:
        path = f"{p}/connections/{{connection_id}}/unlink"
        check.check(path, "post", session.post(f"{p}/connections/{connection}/unlink",
                                               json={}))  # page token: refused
        session.headers["x-csrf-token"] = view["csrfToken"]
        check.check(f"{p}/account", "get", session.get(f"{p}/account"))
        check.check(path, "post", session.post(f"{p}/connections/{connection}/unlink",
                                               json={}))
        check.check(path, "post", session.post(f"{p}/connections/{connection}/unlink",
                                               json={}))
        check.check(f"{p}/wallet-proof/forget", "post",
                    session.post(f"{p}/wallet-proof/forget", json={}))
        check.check(path, "post", session.post(f"{p}/connections/{connection}/unlink",
                                               json={}))
    finally:
        session.close()
    described = {(path, method) for path, item in check.document["paths"].items()
                 if item.get("servers", [{}])[0].get("url") == portal.url
                 for method in item if method != "servers"}
    assert described == {(path, method) for path, method, _ in check.seen}
