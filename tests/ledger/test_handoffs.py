"""Account handoffs (spec 4.5, 3.5): needs_connection -> bound by the portal return ->
ready with a summary code that pays with the connection; needs_budget once spent; the
merchant user id is stored only as a scoped hash; the SDK's client-safe projection."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.orm import Session, sessionmaker

from payments.db import utcnow
from payments.ledger.handoffs import Handoff, encode_handoff
from svc.handoff import client_safe
from tests.factories import add_owned_app
from tests.ledger.flow import (
    PARAMS,
    PayWorld,
    build_world,
    handoff_token,
    sign_permit,
    start_handoff,
    wallet,
)
from tests.support.router import RouterFactory

MERCHANT_USER = "merchant-user-7f3a9c-raw"


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[PayWorld]:
    with start_router() as router:
        yield build_world(router, sessions)


def handoff(world: PayWorld, merchant: str = MERCHANT_USER, **extra: Any) -> dict[str, Any]:
    response = start_handoff(world, merchant, **extra)
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    body: dict[str, Any] = response.json()
    return body


def every_stored_value(world: PayWorld) -> str:
    """All rows of all tables, as text."""
    with world.sessions() as session:
        connection = session.connection()
        dumped: list[str] = []
        tables = inspect(connection).get_table_names()
        assert "account_connections" in tables and "auth_codes" in tables
        for table in tables:
            rows = connection.execute(text(f'SELECT * FROM "{table}"')).all()  # noqa: S608
            dumped.extend(repr(tuple(row)) for row in rows)
    return "\n".join(dumped)


def test_handoff_from_needs_connection_to_ready_and_paid(world: PayWorld) -> None:
    user = wallet(1)
    first = handoff(world, walletHint=user.address, emailHint="p1@example.com")
    assert first["status"] == "needs_connection"
    assert first["connection"] is None and "authorization" not in first
    portal = urlsplit(first["handoff"]["portalUrl"])
    assert f"{portal.scheme}://{portal.netloc}" == world.portal and portal.path == "/authorize"
    query = parse_qs(portal.query)
    assert query["app"] == [world.app.slug]
    assert query["return"] == [f"{world.portal}/{world.app.slug}"]
    assert query["walletHint"] == [user.address] and "renew" not in query
    assert first["handoff"]["appSlug"] == world.app.slug
    assert first["handoff"]["gameAccountLabel"] == "Player One"
    assert first["handoff"]["expiresAt"]

    returned = world.authorize(user, 100_000, handoff=query["handoff"][0])
    connection_id = returned["summary"]["accountConnectionId"]
    assert connection_id

    ready = handoff(world)
    assert ready["status"] == "ready"
    connection = ready["connection"]
    assert connection["id"] == connection_id and connection["status"] == "active"
    assert connection["ownerWallet"] == user.address.lower()
    assert connection["budgetRemaining"] == "100000" and connection["boundAt"]
    authorization = ready["authorization"]
    assert authorization["accountConnectionId"] == connection_id
    assert authorization["ownerWallet"] == user.address.lower()
    assert authorization["spender"] == PARAMS.spender.lower()

    code = world.payment_code(authorization["authorizationCode"], "retry",
                              accountConnectionId=connection_id)
    with world.api() as api:
        paid = world.pay(api, user, "retry", code, "game:retry:1",
                         accountConnectionId=connection_id)
    assert paid.status_code == 201, paid.text
    assert handoff(world)["connection"]["budgetRemaining"] == "90000"


def test_spent_budget_needs_budget_and_renewal_keeps_the_connection(world: PayWorld) -> None:
    user = wallet(1)
    token = handoff_token(handoff(world)["handoff"]["portalUrl"])
    bound = world.authorize(user, 10_000, handoff=token)["summary"]
    code = world.payment_code(bound["authorizationCode"], "retry")
    with world.api() as api:
        assert world.pay(api, user, "retry", code, "k:1").json()["remaining"] == "0"
    low = handoff(world)
    assert low["status"] == "needs_budget" and "authorization" not in low
    assert low["connection"]["id"] == bound["accountConnectionId"]
    assert low["connection"]["budgetRemaining"] == "0"
    query = parse_qs(urlsplit(low["handoff"]["portalUrl"]).query)
    assert query["renew"] == ["1"]
    renewed = world.authorize(user, 50_000, nonce=1, handoff=query["handoff"][0])["summary"]
    assert renewed["accountConnectionId"] == bound["accountConnectionId"]
    again = handoff(world)
    assert again["status"] == "ready"
    # The unsettled 10 000 of the spent budget carries over (see test_budgets).
    assert again["connection"]["budgetRemaining"] == "40000"


@pytest.mark.parametrize(("field", "value", "code"), [
    # Every blank id hashes alike: those players would all share one connection.
    ("merchantUserId", "", "invalid_field"),
    ("merchantUserId", "   ", "invalid_field"),
    # Copied into portalUrl and shown to the player as the wallet the app expects.
    ("walletHint", "<script>", "invalid_field"),
    ("walletHint", "", "invalid_field"),
    ("walletHint", "0x" + "g" * 40, "invalid_field"),
    ("walletHint", "0x" + "ab" * 19, "invalid_field"),
    ("walletHint", "0x" + "ab" * 20 + "\n", "invalid_field"),
    # Port 0 names no server.
    ("returnUrl", "http://localhost:0/game/return", "return_url_not_allowed"),
    ("returnUrl", "http://127.0.0.1:0/game/return", "return_url_not_allowed"),
])
def test_meaningless_input_is_refused(world: PayWorld, field: str, value: str,
                                      code: str) -> None:
    refused = start_handoff(world, MERCHANT_USER, **{field: value})
    assert refused.status_code == 422, refused.text
    body = refused.json()
    assert body["code"] == code and body["message"]
    if code == "invalid_field":
        assert body["field"] == field


def test_a_local_return_url_with_a_real_port_is_accepted(world: PayWorld) -> None:
    started = handoff(world, returnUrl="http://localhost:1/game/return")
    query = parse_qs(urlsplit(started["handoff"]["portalUrl"]).query)
    assert query["return"] == ["http://localhost:1/game/return"]


def test_merchant_user_id_is_never_stored_raw(world: PayWorld) -> None:
    user = wallet(1)
    first = handoff(world)
    token = handoff_token(first["handoff"]["portalUrl"])
    encoded = token.split(".")[0]
    carried = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    assert MERCHANT_USER not in json.dumps(carried)  # the token carries the hash only
    world.authorize(user, 100_000, handoff=token)
    ready = handoff(world)
    assert MERCHANT_USER not in json.dumps(ready)
    stored = every_stored_value(world)
    assert ready["connection"]["id"] in stored  # the scan does see the connection row
    assert MERCHANT_USER not in stored


def test_handoff_token_must_belong_to_the_app_and_be_fresh(world: PayWorld) -> None:
    user = wallet(1)
    token = handoff_token(handoff(world)["handoff"]["portalUrl"])
    assert world.app.organization_id is not None
    add_owned_app(world.sessions, world.app.organization_id, "second-game")
    with world.api(origin=world.portal) as api:
        other_app = api.post("/api/authorizations/return-code", json={
            "app": "second-game", "returnUrl": f"{world.portal}/second-game",
            "permit": sign_permit(user, 100_000), "handoff": token})
        assert other_app.status_code == 422, other_app.text
        assert other_app.json()["code"] == "handoff_invalid"
        stale = encode_handoff(world.router.settings.secret_key, Handoff(
            world.app.id, "0" * 64, "", utcnow() - timedelta(seconds=1)))
        expired = api.post("/api/authorizations/return-code", json={
            "app": world.app.slug, "returnUrl": f"{world.portal}/{world.app.slug}",
            "permit": sign_permit(user, 100_000), "handoff": stale})
        assert expired.status_code == 410, expired.text
        assert expired.json()["code"] == "handoff_expired"
    assert handoff(world)["status"] == "needs_connection"  # nothing was bound


# -- svc.handoff.client_safe ------------------------------------------------------------------

SAFE_KEYS = {"status", "handoff", "connection"}
SAFE_HANDOFF = {"portalUrl", "expiresAt", "appSlug", "gameAccountLabel"}
SAFE_CONNECTION = {"id", "status", "ownerWallet", "budgetRemaining", "boundAt"}


def test_client_safe_on_real_responses(world: PayWorld) -> None:
    fresh = client_safe(handoff(world))
    assert set(fresh) == SAFE_KEYS and fresh["connection"] is None
    assert set(fresh["handoff"]) == SAFE_HANDOFF and fresh["status"] == "needs_connection"
    token = handoff_token(fresh["handoff"]["portalUrl"])
    world.authorize(wallet(1), 100_000, handoff=token)
    ready = handoff(world)
    safe = client_safe(ready)
    assert "authorization" in ready and "authorization" not in safe
    assert ready["authorization"]["authorizationCode"] not in json.dumps(safe)
    assert set(safe) == SAFE_KEYS and safe["status"] == "ready"
    assert set(safe["handoff"]) == SAFE_HANDOFF and set(safe["connection"]) == SAFE_CONNECTION
    assert safe["handoff"] == ready["handoff"] and safe["connection"] == ready["connection"]


def test_client_safe_drops_everything_else() -> None:
    response = {
        "status": "ready", "debug": {"apiKey": "zpk_x"},
        "handoff": {"portalUrl": "p", "expiresAt": "e", "appSlug": "a",
                    "gameAccountLabel": "g", "token": "secret", "merchantUserId": "m"},
        "connection": {"id": "c", "status": "active", "ownerWallet": "0x1",
                       "budgetRemaining": "5", "boundAt": "b", "merchantUserHash": "h"},
        "authorization": {"authorizationCode": "sum_secret", "ownerWallet": "0x1",
                          "spender": "0x2", "accountConnectionId": "c"},
    }
    assert client_safe(response) == {
        "status": "ready",
        "handoff": {"portalUrl": "p", "expiresAt": "e", "appSlug": "a", "gameAccountLabel": "g"},
        "connection": {"id": "c", "status": "active", "ownerWallet": "0x1",
                       "budgetRemaining": "5", "boundAt": "b"},
    }
    assert client_safe({"status": "needs_connection"}) == {
        "status": "needs_connection", "handoff": None, "connection": None}
    assert client_safe({"status": "x", "handoff": "not-an-object", "connection": []}) == {
        "status": "x", "handoff": None, "connection": None}
    with pytest.raises(TypeError):
        client_safe(["status"])  # type: ignore[arg-type]
