"""Backend API keys on the ledger endpoints (spec 5.1): 401 without a valid key, 403 naming
the missing scope, 404 for another organization's objects, legacy empty-scope keys."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction, utcnow
from payments.developer.keys import create_key, revoke_key
from payments.developer.models import ApiKey
from tests.factories import add_developer, add_owned_app
from tests.ledger.flow import PayWorld, build_world, wallet
from tests.support.router import RouterFactory


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[PayWorld]:
    with start_router() as router:
        yield build_world(router, sessions)


def new_key(world: PayWorld, scopes: list[str] | None, *, organization_id: str | None = None,
            app_scoped: bool = True) -> str:
    """A key of the world's app (or, unscoped, of its organization), or of another org."""
    own = organization_id is None
    organization = organization_id or world.app.organization_id
    assert organization is not None
    with transaction(world.sessions) as session:
        return create_key(session, organization_id=organization,
                          app_id=world.app.id if own and app_scoped else None, label="test",
                          scopes=scopes, environment="test", created_by=None,
                          now=utcnow()).secret


@pytest.fixture
def paid(world: PayWorld) -> dict[str, str]:
    """One delivery, its charge, and one order to look up."""
    user = wallet(1)
    code = world.payment_code(world.authorize(user, 100_000)["code"], "retry")
    with world.api() as api:
        body = world.pay(api, user, "retry", code, "k:1").json()
    with world.keyed() as backend:
        order = backend.post("/api/orders", json={
            "productId": world.products["retry"].id, "developerUserId": "u",
            "idempotencyKey": "o:1"}).json()["order"]
    return {"delivery": body["deliveryId"], "charge": body["chargeId"], "order": order["id"]}


def lookups(ids: dict[str, str]) -> dict[str, str]:
    """Path -> the scope it needs."""
    return {f"/api/deliveries/{ids['delivery']}": "deliveries:read",
            "/api/deliveries?idempotencyKey=k:1&app=game": "deliveries:read",
            f"/api/receipts/{ids['charge']}": "receipts:read",
            f"/api/orders/{ids['order']}": "orders:read"}


def writes(world: PayWorld) -> list[tuple[str, dict[str, Any], str]]:
    return [
        ("/api/orders", {"productId": world.products["retry"].id, "developerUserId": "u",
                         "idempotencyKey": "o:2"}, "orders:create"),
        ("/api/account-handoffs", {"appSlug": world.app.slug, "merchantUserId": "m",
                                   "returnUrl": f"{world.portal}/{world.app.slug}"},
         "connections:create"),
        ("/api/charges", {"productId": world.products["legendary"].id,
                          "accountConnectionId": "zconn_x", "idempotencyKey": "c:1"},
         "charges:create"),
    ]


def expect(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    if code is not None:
        assert body["code"] == code and body["message"]
    return body


def test_no_key_or_an_invalid_key_is_401(world: PayWorld, paid: dict[str, str]) -> None:
    revoked = new_key(world, ["deliveries:read", "receipts:read", "orders:read"])
    with transaction(world.sessions) as session:
        revoke_key(session.scalars(select(ApiKey).where(ApiKey.label == "test")).one(), utcnow())
    presented = [{}, {"authorization": "Bearer zpk_test_bogus"},
                 {"authorization": f"Basic {world.api_key}"}, {"authorization": "Bearer"},
                 {"authorization": "Bearer not-a-key"}, {"x-svc-secret-key": "zpk_nope"},
                 {"authorization": f"Bearer {world.api_key}x"},
                 {"authorization": f"Bearer {revoked}"}]
    with world.api() as api:
        for headers in presented:
            for path in lookups(paid):
                expect(api.get(path, headers=headers), 401, "valid_api_key_required")
            for path, body, _ in writes(world):
                expect(api.post(path, json=body, headers=headers), 401,
                       "valid_api_key_required")


def test_a_key_without_the_scope_is_403_naming_it(world: PayWorld,
                                                 paid: dict[str, str]) -> None:
    with world.api() as api:
        for path, scope in lookups(paid).items():
            others = [s for s in ("deliveries:read", "receipts:read", "orders:read",
                                  "orders:create") if s != scope]
            key = new_key(world, others)
            body = expect(api.get(path, headers={"authorization": f"Bearer {key}"}), 403,
                          "api_key_scope_missing")
            assert body["scope"] == scope and scope in body["message"]
        for path, payload, scope in writes(world):
            key = new_key(world, ["deliveries:read", "receipts:read", "orders:read"])
            body = expect(api.post(path, json=payload, headers={
                "authorization": f"Bearer {key}"}), 403, "api_key_scope_missing")
            assert body["scope"] == scope


def test_another_organizations_key_finds_nothing(world: PayWorld,
                                                 paid: dict[str, str]) -> None:
    _, other_org = add_developer(world.sessions, "dev2")
    foreign = new_key(world, None, organization_id=other_org)  # the default read scopes
    foreign_all = new_key(world, ["orders:create", "connections:create", "charges:create"],
                          organization_id=other_org)
    with world.api(authorization=f"Bearer {foreign}") as api:
        for path in lookups(paid):
            expect(api.get(path), 404, "not_found")
    with world.api(authorization=f"Bearer {foreign_all}") as api:
        for path, body, _ in writes(world):
            expect(api.post(path, json=body), 404, "not_found")
    # A key of the same organization but another app is a stranger too.
    own_org = world.app.organization_id
    assert own_org is not None
    other_app = add_owned_app(world.sessions, own_org, "second-game")
    with transaction(world.sessions) as session:
        sibling = create_key(session, organization_id=own_org,
                             app_id=other_app.id, label="sibling", scopes=None,
                             environment="test", created_by=None, now=utcnow()).secret
    with world.api(authorization=f"Bearer {sibling}") as api:
        for path in lookups(paid):
            expect(api.get(path), 404, "not_found")


def test_a_product_slug_for_an_id_says_so(world: PayWorld) -> None:
    """The product routes take a zprod_ id; a slug (the first guess of a developer) is
    not found as before, and the message says what is expected, for orders and charges,
    without saying whether a product exists."""
    key = new_key(world, ["orders:create", "charges:create"])
    slug = world.products["retry"].slug
    with world.api(authorization=f"Bearer {key}") as api:
        for path, body in (
                ("/api/orders", {"productId": slug, "developerUserId": "u",
                                 "idempotencyKey": "s:1"}),
                ("/api/charges", {"productId": slug, "accountConnectionId": "zconn_x",
                                  "developerUserId": "u", "idempotencyKey": "s:2"})):
            message = expect(api.post(path, json=body), 404, "not_found")["message"]
            assert "zprod_ id, not its slug" in message and "svc product list" in message, path
        unknown = expect(api.post("/api/orders", json={
            "productId": "zprod_" + "0" * 30, "developerUserId": "u",
            "idempotencyKey": "s:3"}), 404, "not_found")
        assert unknown["message"] == "No such product for this API key."


def test_legacy_org_keys_and_the_secret_key_header(world: PayWorld,
                                                  paid: dict[str, str]) -> None:
    legacy = new_key(world, ["orders:read"])
    with transaction(world.sessions) as session:  # keys from before scopes existed
        session.execute(update(ApiKey).where(ApiKey.label == "test").values(scopes=[]))
    org_wide = new_key(world, ["deliveries:read", "receipts:read", "orders:read"],
                       app_scoped=False)
    presented = [{"authorization": f"Bearer {legacy}"}, {"x-svc-secret-key": legacy},
                 {"x-svc-secret-key": world.api_key}, {"authorization": f"bearer {org_wide}"},
                 {"authorization": f"Bearer  {world.api_key}"}]
    with world.api() as api:
        for headers in presented:
            for path in lookups(paid):
                expect(api.get(path, headers=headers), 200)
        body = expect(api.get(f"/api/deliveries/{paid['delivery']}",
                              headers={"x-svc-secret-key": legacy}), 200)
        assert body["delivery"]["deliveryId"] == paid["delivery"]
        # The legacy key can write, too (deny-by-default is a later migration).
        created = api.post("/api/orders", headers={"x-svc-secret-key": legacy}, json={
            "productId": world.products["retry"].id, "developerUserId": "u",
            "idempotencyKey": "o:legacy"})
        expect(created, 201)


def console_client(world: PayWorld, developer_id: str, **headers: str) -> httpx.Client:
    from tests.factories import open_console_session
    cookie, _ = open_console_session(world.sessions, developer_id)
    return httpx.Client(base_url=world.router.url, timeout=30, headers={
        "host": f"console.localhost:{world.router.port}", "cookie": f"svc_console={cookie}",
        **headers})


def test_console_session_looks_up_deliveries_and_receipts(world: PayWorld,
                                                         paid: dict[str, str]) -> None:
    """Spec 5.1 item 5: a developer session may call the lookups, on the console host where
    the session lives; the bodies are those a backend key gets."""
    from payments.developer.models import Developer
    with world.sessions() as session:
        owner = session.scalar(select(Developer.id).where(Developer.username == "dev1"))
    assert owner is not None
    stranger, _ = add_developer(world.sessions, "dev2")
    paths = [f"/api/deliveries/{paid['delivery']}", f"/api/receipts/{paid['charge']}"]
    with world.keyed() as backend, console_client(world, owner) as console:
        for path in paths:
            by_key = expect(backend.get(path), 200)
            assert expect(console.get(path), 200) == by_key
        expect(console.get("/api/deliveries/ztdlv_nope"), 404, "not_found")
    with console_client(world, stranger) as other:
        for path in paths:  # another organization's ids are not found, not forbidden
            expect(other.get(path), 404, "not_found")
    with httpx.Client(base_url=world.router.url, timeout=30, headers={
            "host": f"console.localhost:{world.router.port}"}) as anonymous:
        for path in paths:
            expect(anonymous.get(path), 401, "developer_auth_required")
    with console_client(world, owner, authorization=f"Bearer {world.api_key}") as keyed:
        expect(keyed.get(paths[0]), 401, "developer_session_required")
    with world.api(cookie=f"svc_console={'x' * 40}") as api_host:
        expect(api_host.get(paths[0]), 401)  # the API host never reads the console cookie
