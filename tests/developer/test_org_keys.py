"""Organization keys (spec 2.6) through a real router: a console session makes one, it acts
on every app of its organization and on nothing else, and CLI grants cannot touch them."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction
from payments.developer.models import ApiKey
from payments.developer.tokens import token_hash
from payments.models import App
from payments.products import create_product
from tests.developer.test_api import World
from tests.factories import add_developer, add_owned_app
from tests.support.router import RouterFactory

KEYS = "/api/developer/keys"
READ_AND_ORDER = ["orders:create", "orders:read", "deliveries:read"]


@dataclass
class OrgWorld:
    world: World
    products: dict[str, str]  # app slug -> one product id: "game", "second", "theirs"
    stranger_id: str  # the developer of the organization that owns "theirs"


@pytest.fixture
def org(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[OrgWorld]:
    developer_id, org_id = add_developer(sessions)
    stranger_id, other_org = add_developer(sessions, "dev2")
    apps = [add_owned_app(sessions, org_id, "game"), add_owned_app(sessions, org_id, "second"),
            add_owned_app(sessions, other_org, "theirs")]
    products = {}
    with transaction(sessions) as session:
        for app in apps:
            attached = session.get(App, app.id)
            assert attached is not None
            products[app.slug] = create_product(session, attached,
                                                {"template": "unlock_level"}).id
    with start_router() as router:
        yield OrgWorld(World(router, sessions, developer_id, org_id), products, stranger_id)


def order(api: httpx.Client, product_id: str) -> httpx.Response:
    return api.post("/api/orders", json={"productId": product_id, "developerUserId": "u",
                                         "idempotencyKey": f"o:{product_id}"})


def test_an_organization_key_acts_on_every_app_of_its_organization(
        org: OrgWorld, caplog: pytest.LogCaptureFixture,
        capfd: pytest.CaptureFixture[str]) -> None:
    caplog.set_level(logging.DEBUG)
    w = org.world
    with w.console() as console:
        created = console.post(KEYS, json={"label": "all games", "scopes": READ_AND_ORDER})
        assert created.status_code == 201, created.text
        assert created.headers["cache-control"] == "no-store"
        body = created.json()
        secret, key = body["secret"], body["key"]
        assert secret.startswith("zpk_test_")
        assert (key["ownership"], key["appId"], key["organizationId"]) == \
            ("organization", None, w.org_id)
    with w.api(secret) as api:
        for slug in ("game", "second"):
            made = order(api, org.products[slug])
            assert made.status_code == 201, made.text
            looked_up = api.get(f"/api/orders/{made.json()['order']['id']}")
            assert looked_up.status_code == 200, looked_up.text
        foreign = order(api, org.products["theirs"])
        assert (foreign.status_code, foreign.json()["code"]) == (404, "not_found")

    with w.console() as console:
        listed = console.get(KEYS)
        assert listed.status_code == 200 and secret not in listed.text
        [shown] = listed.json()["keys"]
        assert shown["id"] == key["id"] and shown["preview"] == f"zpk_test_…{secret[-4:]}"
        # An app's list holds that app's keys only; the organization key is not one of them.
        app_key = console.post("/api/developer/apps/game/keys", json={"label": "game only"})
        assert app_key.json()["key"]["ownership"] == "app"
        app_keys = console.get("/api/developer/apps/game/keys").json()["keys"]
        assert [k["label"] for k in app_keys] == ["game only"]
        assert [k["id"] for k in console.get(KEYS).json()["keys"]] == [key["id"]]
        # Neither can be reached through the other's routes.
        assert console.post(f"/api/developer/apps/game/keys/{key['id']}/revoke").json()[
            "code"] == "key_not_found"
        assert console.post(f"{KEYS}/{app_key.json()['key']['id']}/revoke").json()[
            "code"] == "key_not_found"

        changed = console.patch(f"{KEYS}/{key['id']}", json={"label": "renamed",
                                                             "scopes": ["orders:read"]})
        assert changed.status_code == 200 and secret not in changed.text
        assert (changed.json()["key"]["label"], changed.json()["key"]["scopes"]) == \
            ("renamed", ["orders:read"])
        assert console.patch(f"{KEYS}/{key['id']}", json={}).json()["code"] == "missing_field"
    with w.api(secret) as api:
        refused = api.post("/api/orders", json={"productId": org.products["second"],
                                                "developerUserId": "u", "idempotencyKey": "x"})
        assert (refused.status_code, refused.json()["code"]) == (403, "api_key_scope_missing")

    with w.console() as console:
        revoked = console.post(f"{KEYS}/{key['id']}/revoke")
        assert revoked.status_code == 200 and revoked.json()["key"]["revokedAt"] is not None
        assert secret not in revoked.text
        assert console.get(KEYS).json()["keys"][0]["revokedAt"] is not None
    with w.api(secret) as api:
        gone = api.get(f"/api/orders/{made.json()['order']['id']}")
        assert (gone.status_code, gone.json()["code"]) == (401, "valid_api_key_required")
    with w.sessions() as session:
        stored = session.scalars(select(ApiKey).where(ApiKey.id == key["id"])).one()
        assert stored.app_id is None and stored.secret_hash == token_hash(secret)
        assert secret not in (stored.preview, stored.label)
    out, err = capfd.readouterr()
    assert secret not in caplog.text + out + err  # never logged


def test_cli_grants_cannot_create_list_or_revoke_organization_keys(org: OrgWorld) -> None:
    w = org.world
    with w.console() as console:
        existing = console.post(KEYS, json={"scopes": READ_AND_ORDER}).json()
    key_id = existing["key"]["id"]
    token = w.grant("game", ["apps:read", "apps:write", "keys:create"])
    console_host = {"host": f"console.localhost:{w.router.port}",
                    "authorization": f"Bearer {token}"}
    attempts = [("GET", KEYS, None), ("POST", KEYS, {"scopes": READ_AND_ORDER}),
                ("POST", KEYS, b"{not json"), ("PATCH", f"{KEYS}/{key_id}", {"label": "x"}),
                ("POST", f"{KEYS}/{key_id}/revoke", None)]
    with httpx.Client(base_url=w.router.url, headers=console_host, timeout=10) as grant:
        for method, path, body in attempts:
            answer = grant.request(method, path, content=body) if isinstance(body, bytes) \
                else grant.request(method, path, json=body)
            assert answer.status_code == 403, (method, path, answer.text)
            assert answer.json()["code"] == "developer_session_required"
            assert "zpk_" not in answer.text
        # Through the app-key routes, an organization key is not the grant's app's key.
        assert grant.post(f"/api/developer/apps/game/keys/{key_id}/revoke").json()[
            "code"] == "key_not_found"
    with w.api(token) as api:  # the API host has no organization-key routes at all
        for method, path, _ in attempts:
            assert api.request(method, path).status_code == 404, (method, path)
    with w.sessions() as session:
        assert len(session.scalars(select(ApiKey)).all()) == 1  # nothing made
        kept = session.get(ApiKey, key_id)
        assert kept is not None and kept.revoked_at is None and kept.label == ""
    with w.api(existing["secret"]) as api:
        assert order(api, org.products["second"]).status_code == 201


def test_organization_keys_stay_inside_their_organization(org: OrgWorld) -> None:
    w = org.world
    with w.console() as console:
        key = console.post(KEYS, json={"scopes": READ_AND_ORDER}).json()["key"]
        elsewhere = console.post(KEYS, json={"organizationId": "zorg_nope"})
        assert (elsewhere.status_code, elsewhere.json()["code"]) == \
            (404, "organization_not_found")
        for body, code in (({"scopes": []}, "invalid_scope"),
                           ({"environment": "prod"}, "invalid_environment"),
                           ({"label": 5}, "invalid_field")):
            refused = console.post(KEYS, json=body)
            assert (refused.status_code, refused.json()["code"]) == (422, code), body
    stranger = World(w.router, w.sessions, org.stranger_id, "")
    with stranger.console() as console:
        assert console.get(KEYS).json()["keys"] == []
        for answer in (console.patch(f"{KEYS}/{key['id']}", json={"label": "mine"}),
                       console.post(f"{KEYS}/{key['id']}/revoke")):
            assert (answer.status_code, answer.json()["code"]) == (404, "key_not_found")
        own = console.post(KEYS, json={"organizationId": w.org_id})
        assert (own.status_code, own.json()["code"]) == (404, "organization_not_found")
    with httpx.Client(base_url=w.router.url, timeout=10,
                      headers={"host": f"console.localhost:{w.router.port}"}) as anonymous:
        assert anonymous.get(KEYS).json()["code"] == "developer_auth_required"
    with w.console() as console:
        no_csrf = console.post(KEYS, json={}, headers={"x-csrf-token": ""})
        assert (no_csrf.status_code, no_csrf.json()["code"]) == (403, "csrf_failed")
        assert len(console.get(KEYS).json()["keys"]) == 1
