"""The delivery lookup by the developer's idempotency key (``GET /api/deliveries?
idempotencyKey=``, ours beyond spec 4.3): a backend that lost the answer and has no webhook
yet learns from it whether the key was charged. It finds product-route and trusted-charge
deliveries, says ``not_found`` (echoing the key) only when the app holds none under the
key, and shows no other app's deliveries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction, utcnow
from payments.developer.keys import create_key
from payments.developer.models import Developer
from tests.factories import add_developer, add_owned_app, open_console_session
from tests.ledger.flow import PayWorld, add_product, build_world, connect, wallet
from tests.support.router import RouterFactory

FIND = "/api/deliveries"
TRUSTED = {"trustedServerCharge": {"enabled": True, "maxAmountAtomic": "20000"}}


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[PayWorld]:
    with start_router() as router:
        yield build_world(router, sessions)


def pay_route(world: PayWorld, product: str, key: str, seed: int = 1) -> dict[str, Any]:
    user = wallet(seed)
    code = world.payment_code(world.authorize(user, 1_000_000)["code"], product)
    with world.api(origin=world.audience) as api:
        paid = world.pay(api, user, product, code, key)
    assert paid.status_code == 201, paid.text
    body: dict[str, Any] = paid.json()
    return body


def key_of(world: PayWorld, scopes: list[str] | None, *, app_id: str | None,
           organization_id: str | None = None) -> str:
    organization = organization_id or world.app.organization_id
    assert organization is not None
    with transaction(world.sessions) as session:
        return create_key(session, organization_id=organization, app_id=app_id, label="k",
                          scopes=scopes, environment="test", created_by=None,
                          now=utcnow()).secret


def find(world: PayWorld, secret: str | None, **query: str) -> httpx.Response:
    headers = {"authorization": f"Bearer {secret}"} if secret else {}
    with world.api(**headers) as api:
        return api.get(FIND, params=query)


def expect(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    if code is not None:
        assert body["code"] == code and body["message"], body
    return body


def by_id(world: PayWorld, delivery_id: str) -> dict[str, Any]:
    with world.keyed() as backend:
        return expect(backend.get(f"{FIND}/{delivery_id}"), 200)


def test_finds_a_product_route_delivery_as_the_id_lookup_shows_it(world: PayWorld) -> None:
    paid = pay_route(world, "retry", "game:retry:1")
    found = expect(find(world, world.api_key, idempotencyKey="game:retry:1"), 200)
    assert found == by_id(world, paid["deliveryId"])
    assert found["delivery"]["idempotencyKey"] == "svc:game:retry:1"
    assert found["delivery"]["status"] == "delivered"
    # The app may be named, by slug or id, when it is the key's own.
    for app in (world.app.slug, world.app.id):
        assert expect(find(world, world.api_key, idempotencyKey="game:retry:1", app=app),
                      200) == found


def test_finds_trusted_charges_and_awaiting_settlement(world: PayWorld) -> None:
    for slug, mode in (("boost", "optimistic"), ("relic", "settled_first")):
        add_product(world, {"slug": slug, "name": slug, "priceAtomic": "10000",
                            "riskMode": mode, "riskPolicy": TRUSTED})
    connection = connect(world, wallet(2), "user-1", 1_000_000)["summary"][
        "accountConnectionId"]
    for slug, status in (("boost", "delivered"), ("relic", "awaiting_settlement")):
        key = f"game:{slug}:t1"
        with world.keyed() as backend:
            charged = backend.post("/api/charges", json={
                "productId": world.products[slug].id, "accountConnectionId": connection,
                "idempotencyKey": key, "developerUserId": "user-1"})
        assert charged.status_code == 201, charged.text
        found = expect(find(world, world.api_key, idempotencyKey=key), 200)
        assert found == by_id(world, charged.json()["deliveryId"])
        # settled_first: paid, not yet to fulfil; the lookup says which
        assert found["delivery"]["status"] == status


def test_an_unknown_key_is_not_found_with_the_key_echoed(world: PayWorld) -> None:
    pay_route(world, "retry", "game:retry:1")
    for key in ("game:retry:2", "GAME:RETRY:1", "game:retry:1 ", "svc:game:retry:2"):
        body = expect(find(world, world.api_key, idempotencyKey=key), 404, "not_found")
        assert body["idempotencyKey"] == key  # what tells it from a route that is missing
    # The delivery's form of a charged key is not "not found" (read: not charged)...
    body = expect(find(world, world.api_key, idempotencyKey="svc:game:retry:1"), 422,
                  "invalid_idempotency_key")
    assert "send the key as it was sent" in body["message"]
    # ...while a key the developer chose with that prefix is found as sent.
    pay_route(world, "retry", "svc:own", seed=2)
    found = expect(find(world, world.api_key, idempotencyKey="svc:own"), 200)
    assert found["delivery"]["idempotencyKey"] == "svc:svc:own"
    # ...which a server without the route does not say.
    with world.keyed() as backend:
        missing = expect(backend.get("/api/deliveriez", params={"idempotencyKey": "x"}), 404)
    assert "idempotencyKey" not in missing


def test_another_apps_key_finds_nothing_and_is_not_told_more(world: PayWorld) -> None:
    pay_route(world, "retry", "game:retry:1")
    organization = world.app.organization_id
    assert organization is not None
    sibling_app = add_owned_app(world.sessions, organization, "second-game")
    sibling = key_of(world, ["deliveries:read"], app_id=sibling_app.id)
    # Its own app holds nothing under the key: the same 404 as any unknown key.
    body = expect(find(world, sibling, idempotencyKey="game:retry:1"), 404, "not_found")
    assert body["idempotencyKey"] == "game:retry:1"
    # Naming the app it cannot see: not found (not 403), and nothing about the key.
    for app in (world.app.slug, world.app.id, "no-such-app"):
        body = expect(find(world, sibling, idempotencyKey="game:retry:1", app=app), 404,
                      "not_found")
        assert "idempotencyKey" not in body and "delivery" not in body
    _, other_org = add_developer(world.sessions, "dev2")
    foreign = key_of(world, None, app_id=None, organization_id=other_org)
    for app in (world.app.slug, world.app.id):
        expect(find(world, foreign, idempotencyKey="game:retry:1", app=app), 404, "not_found")


def test_an_organization_key_names_the_app(world: PayWorld) -> None:
    paid = pay_route(world, "retry", "game:retry:1")
    org_key = key_of(world, ["deliveries:read"], app_id=None)
    body = expect(find(world, org_key, idempotencyKey="game:retry:1"), 422, "missing_field")
    assert body["field"] == "app"
    for app in (world.app.slug, world.app.id):
        found = expect(find(world, org_key, idempotencyKey="game:retry:1", app=app), 200)
        assert found["delivery"]["deliveryId"] == paid["deliveryId"]


def test_keys_and_scopes(world: PayWorld) -> None:
    pay_route(world, "retry", "game:retry:1")
    expect(find(world, None, idempotencyKey="game:retry:1"), 401, "valid_api_key_required")
    expect(find(world, "zpk_nope", idempotencyKey="game:retry:1"), 401,
           "valid_api_key_required")
    narrow = key_of(world, ["receipts:read", "orders:read", "orders:create"],
                    app_id=world.app.id)
    body = expect(find(world, narrow, idempotencyKey="game:retry:1"), 403,
                  "api_key_scope_missing")
    assert body["scope"] == "deliveries:read"
    # The key is checked before the query: no key, no word on the input either.
    expect(find(world, None), 401, "valid_api_key_required")


def test_bad_input_is_a_422_never_a_500(world: PayWorld) -> None:
    cases: list[tuple[str, str, str]] = [
        ("", "invalid_idempotency_key", "idempotencyKey"),
        ("?idempotencyKey=", "invalid_idempotency_key", "idempotencyKey"),
        ("?idempotencyKey=%20%20", "invalid_idempotency_key", "idempotencyKey"),
        ("?idempotencyKey=" + "k" * 201, "invalid_idempotency_key", "idempotencyKey"),
        ("?idempotencyKey=a%00b", "invalid_idempotency_key", "idempotencyKey"),
        ("?idempotencyKey=a&idempotencyKey=b", "invalid_idempotency_key", "idempotencyKey"),
        ("?idempotencyKey=a&app=", "invalid_field", "app"),
        ("?idempotencyKey=a&app=" + "g" * 65, "invalid_field", "app"),
        ("?idempotencyKey=a&app=ga%00me", "invalid_field", "app"),
        ("?idempotencyKey=a&app=game&app=game", "invalid_field", "app"),
    ]
    with world.keyed() as backend:
        for query, code, field in cases:
            body = expect(backend.get(FIND + query), 422, code)
            assert body["field"] == field, query
        # Bytes that are not UTF-8 are read as replacement characters: just a key not used.
        expect(backend.get(FIND + "?idempotencyKey=%ff%fe"), 404, "not_found")
        expect(backend.get(FIND + "?idempotencyKey=" + "k" * 200), 404, "not_found")


def test_a_console_session_names_the_app(world: PayWorld) -> None:
    paid = pay_route(world, "retry", "game:retry:1")
    with world.sessions() as session:
        owner = session.scalar(select(Developer.id).where(Developer.username == "dev1"))
    assert owner is not None
    stranger, _ = add_developer(world.sessions, "dev2")

    def console(developer_id: str) -> httpx.Client:
        cookie, _ = open_console_session(world.sessions, developer_id)
        return httpx.Client(base_url=world.router.url, timeout=30, headers={
            "host": f"console.localhost:{world.router.port}",
            "cookie": f"svc_console={cookie}"})

    with console(owner) as mine, console(stranger) as theirs:
        found = expect(mine.get(FIND, params={"idempotencyKey": "game:retry:1",
                                              "app": "game"}), 200)
        assert found == by_id(world, paid["deliveryId"])
        body = expect(mine.get(FIND, params={"idempotencyKey": "game:retry:1"}), 422,
                      "missing_field")
        assert body["field"] == "app"
        expect(mine.get(FIND, params={"idempotencyKey": "game:retry:9", "app": "game"}),
               404, "not_found")
        expect(theirs.get(FIND, params={"idempotencyKey": "game:retry:1", "app": "game"}),
               404, "not_found")
