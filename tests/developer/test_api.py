"""The JSON developer API through a real router: grants, scopes, keys, apps."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction, utcnow
from payments.developer import grants
from payments.developer.keys import key_for_secret, require_key_scope
from payments.developer.models import ApiKey, CliGrant, OperatorNotification
from payments.developer.tokens import token_hash
from payments.errors import ApiError
from payments.models import App, PayToStatus
from tests.factories import add_developer, add_owned_app, open_console_session
from tests.router.conftest import RunningRouter


@dataclass
class World:
    router: RunningRouter
    sessions: sessionmaker[Session]
    developer_id: str
    org_id: str

    def api(self, token: str | None = None) -> httpx.Client:
        return self.router.api(token)

    def console(self) -> httpx.Client:
        cookie, csrf = open_console_session(self.sessions, self.developer_id)
        return httpx.Client(base_url=self.router.url, timeout=10, headers={
            "host": f"console.localhost:{self.router.port}", "x-csrf-token": csrf,
            "cookie": f"svc_console={cookie}"})

    def grant(self, slug: str, scopes: list[str], ttl: int = 7200) -> str:
        """A CLI grant through the real device flow: request, approve, redeem."""
        with self.api() as api:
            started = api.post("/api/developer/cli/auth-requests",
                               json={"app": slug, "scopes": scopes, "ttlSeconds": ttl}).json()
            pending = api.post("/api/developer/cli/token",
                               json={"deviceCode": started["deviceCode"]})
            assert pending.status_code == 400
            assert pending.json()["code"] == "authorization_pending"
        with self.console() as console:
            answer = console.post("/api/developer/cli/approve", json={
                "userCode": started["userCode"].replace("-", "").lower(), "decision": "approve"})
            assert answer.status_code == 200, answer.text
        with self.api() as api:
            issued = api.post("/api/developer/cli/token",
                              json={"deviceCode": started["deviceCode"]})
            assert issued.status_code == 200, issued.text
            again = api.post("/api/developer/cli/token",
                             json={"deviceCode": started["deviceCode"]})
            assert again.status_code == 400  # a device code is redeemed once
        token: str = issued.json()["token"]
        assert token.startswith("zcli_")
        return token


def test_grant_scopes_and_app_binding(world: World) -> None:
    _, other_org = add_developer(world.sessions, "dev2")
    add_owned_app(world.sessions, other_org, "theirs")
    add_owned_app(world.sessions, world.org_id, "second")
    token = world.grant("game", ["apps:read"])
    with world.api(token) as api:
        me = api.get("/api/developer/me").json()
        assert me["via"] == "grant"
        assert me["grant"]["app"] == "game"
        assert me["grant"]["scopes"] == ["apps:read"]
        assert api.get("/api/developer/apps/game").json()["app"]["slug"] == "game"
        listed = api.get("/api/developer/apps").json()["apps"]
        assert [a["slug"] for a in listed] == ["game"]  # the grant's one app only
        missing = api.patch("/api/developer/apps/game", json={"headline": "x"})
        assert missing.status_code == 403
        body = missing.json()
        assert body["code"] == "developer_cli_scope_missing"
        assert body["scope"] == "apps:write"
        assert body["command"] == "svc auth browser --app game --scopes apps:read,apps:write"
        assert api.get("/api/developer/apps/second").json()["code"] == \
            "developer_cli_app_mismatch"
        assert api.get("/api/developer/apps/theirs").status_code == 404
        assert api.post("/api/developer/apps", json={"name": "New"}).json()["code"] == \
            "developer_session_required"


def test_expired_and_revoked_grants_are_refused(world: World) -> None:
    token = world.grant("game", ["apps:read"])
    with transaction(world.sessions) as session:
        session.execute(update(CliGrant).values(expires_at=utcnow() - timedelta(seconds=1)))
    with world.api(token) as api:
        response = api.get("/api/developer/apps/game")
        assert response.status_code == 401
        assert response.json()["code"] == "developer_grant_expired"
    fresh = world.grant("game", ["apps:read"])
    with world.api(fresh) as api:
        assert api.delete("/api/developer/cli/grant").status_code == 200
        assert api.get("/api/developer/me").json()["code"] == "developer_auth_required"


def test_grants_refuse_unknown_scopes_and_ttls(world: World) -> None:
    with world.api() as api:
        for body, code in (({"scopes": ["admin"]}, "invalid_scope"),
                           ({"scopes": ["settlement:run"]}, "invalid_scope"),
                           ({"scopes": ["config:read"]}, "invalid_scope"),  # not spec 5.3's
                           ({"ttlSeconds": 10**9}, "invalid_ttl"),
                           ({"ttlSeconds": "2h"}, "invalid_field"),
                           ({"app": "Not A Slug"}, "invalid_app")):
            response = api.post("/api/developer/cli/auth-requests", json=body)
            assert response.status_code == 422, body
            assert response.json()["code"] == code


def test_denied_request(world: World) -> None:
    with world.api() as api:
        started = api.post("/api/developer/cli/auth-requests", json={"app": "game"}).json()
    with world.console() as console:
        assert console.post("/api/developer/cli/approve", json={
            "userCode": started["userCode"], "decision": "deny"}).json()["status"] == "denied"
        again = console.post("/api/developer/cli/approve", json={
            "userCode": started["userCode"], "decision": "approve"})
        assert again.status_code == 409
    with world.api() as api:
        response = api.post("/api/developer/cli/token", json={"deviceCode": started["deviceCode"]})
        assert response.json()["code"] == "access_denied"


def test_api_keys_secret_shown_once(world: World) -> None:
    token = world.grant("game", ["apps:read", "keys:create"])
    with world.api(token) as api:
        created = api.post("/api/developer/apps/game/keys", json={
            "label": "backend", "scopes": ["orders:create", "deliveries:read"]})
        assert created.status_code == 201
        assert created.headers["cache-control"] == "no-store"
        secret = created.json()["secret"]
        assert secret.startswith("zpk_test_")
        listing = api.get("/api/developer/apps/game/keys")
        assert secret not in listing.text
        key = listing.json()["keys"][0]
        assert key["preview"] == f"zpk_test_…{secret[-4:]}"
        assert api.post("/api/developer/apps/game/keys", json={"scopes": []}).status_code == 422
    with world.sessions() as session:
        stored = session.scalars(select(ApiKey)).one()
        assert secret not in (stored.secret_hash, stored.preview)
        found = key_for_secret(session, secret)
        require_key_scope(found, "orders:create")
        with pytest.raises(ApiError) as caught:
            require_key_scope(found, "charges:create")
        assert caught.value.code == "api_key_scope_missing"
        assert caught.value.extra["scope"] == "charges:create"
        found.scopes = []  # a legacy key: empty scopes still work during migration
        require_key_scope(found, "charges:create")
    with world.api(token) as api:
        revoked = api.post(f"/api/developer/apps/game/keys/{key['id']}/revoke")
        assert revoked.json()["key"]["revokedAt"] is not None
    with world.sessions() as session, pytest.raises(ApiError) as caught:
        key_for_secret(session, secret)
    assert caught.value.code == "valid_api_key_required"


def test_api_key_label_and_scopes_change_but_not_the_secret(world: World) -> None:
    reader = world.grant("game", ["apps:read"])
    token = world.grant("game", ["apps:read", "keys:create"])
    with world.api(token) as api:
        created = api.post("/api/developer/apps/game/keys", json={"label": "old"}).json()
        key_id, secret = created["key"]["id"], created["secret"]
        path = f"/api/developer/apps/game/keys/{key_id}"
        changed = api.patch(path, json={"label": " backend ", "scopes": [
            "charges:create", "orders:create", "orders:create"]})
        assert changed.status_code == 200, changed.text
        key = changed.json()["key"]
        assert (key["label"], key["scopes"]) == ("backend", ["orders:create", "charges:create"])
        assert secret not in changed.text and "secret" not in changed.json()
        relabelled = api.patch(path, json={"label": "renamed"}).json()["key"]
        assert relabelled["scopes"] == ["orders:create", "charges:create"]
        for body, code in (({}, "missing_field"), ({"scopes": []}, "invalid_scope"),
                           ({"scopes": ["settle"]}, "invalid_scope"),
                           ({"label": "x" * 121}, "invalid_field")):
            refused = api.patch(path, json=body)
            assert (refused.status_code, refused.json()["code"]) == (422, code), body
        assert api.patch("/api/developer/apps/game/keys/zkey_nope",
                         json={"label": "x"}).json()["code"] == "key_not_found"
        api.post(f"{path}/revoke")
        gone = api.patch(path, json={"label": "again"})
        assert (gone.status_code, gone.json()["code"]) == (409, "key_revoked")
    with world.api(reader) as api:
        assert api.patch(path, json={"label": "x"}).json()["code"] == \
            "developer_cli_scope_missing"
    with world.sessions() as session:
        stored = session.get(ApiKey, key_id)
        assert stored is not None and stored.label == "renamed"
        assert stored.secret_hash == token_hash(secret)  # the same secret, still hashed


def test_console_session_creates_app_and_notifies_operators(world: World) -> None:
    with world.console() as console:
        created = console.post("/api/developer/apps", json={"name": "Star Miner",
                                                            "tags": ["space"]})
        assert created.status_code == 201, created.text
        app = created.json()["app"]
        assert app["slug"] == "star-miner"
        assert app["payToStatus"] == "unbound"
        reserved = console.post("/api/developer/apps", json={"name": "Admin"})
        assert reserved.json()["code"] == "reserved_slug"
        changed = console.patch("/api/developer/apps/star-miner",
                                json={"payTo": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"})
        assert changed.json()["app"]["payToStatus"] == "testing"
        bad = console.patch("/api/developer/apps/star-miner", json={"payTo": "0x123"})
        assert bad.json()["code"] == "invalid_pay_to"
        product = console.post("/api/developer/apps/star-miner/products",
                               json={"template": "unlock_level"})
        assert product.status_code == 201
        assert product.json()["product"]["priceAtomic"] == "30000"
        tip = console.post("/api/developer/apps/star-miner/products",
                           json={"template": "tip_creator"}).json()["product"]
        assert tip["pricing"] == "dynamic_order"
        duplicate = console.post("/api/developer/apps/star-miner/products",
                                 json={"template": "unlock_level"})
        assert duplicate.status_code == 409
    with world.sessions() as session:
        note = session.scalars(select(OperatorNotification)).one()
        assert note.kind.value == "developer_app_requested"
        stored = session.scalars(select(App).where(App.slug == "star-miner")).one()
        assert stored.organization_id == world.org_id
        assert stored.pay_to_status is PayToStatus.TESTING


def test_a_product_renamed_onto_a_taken_slug_or_sku_is_a_conflict_not_a_server_error(
        world: World) -> None:
    products = "/api/developer/apps/game/products"
    with world.console() as console:
        for slug in ("gems", "coins"):
            made = console.post(products, json={"slug": slug, "name": slug.title(),
                                                "priceAtomic": "10000"})
            assert made.status_code == 201, made.text
        for taken in ({"slug": "gems"}, {"sku": "gems"}):
            refused = console.patch(f"{products}/coins", json=taken)
            assert refused.status_code == 409, refused.text
            assert refused.json()["code"] == "product_exists"
        renamed = console.patch(f"{products}/coins", json={"slug": "coins-100"})
        assert renamed.status_code == 200, renamed.text
        assert renamed.json()["product"]["paymentRoute"].endswith("/api/pay/game/coins-100")
        # The old route stops working: said as config apply says it.
        [warning] = renamed.json()["warnings"]
        assert (warning["code"], warning["key"]) == ("product_slug_changed", "coins-100")
        assert "/api/pay/game/coins to /api/pay/game/coins-100" in warning["message"]
        for same in ({"slug": "coins-100"}, {"name": "Coins"}):
            kept = console.patch(f"{products}/coins-100", json=same)
            assert (kept.status_code, kept.json()["warnings"]) == (200, []), kept.text
        listed = console.get(products).json()["products"]
    assert sorted((p["slug"], p["sku"]) for p in listed) == [("coins-100", "coins"),
                                                              ("gems", "gems")]


@pytest.mark.parametrize(("method", "path", "body", "code"), [
    ("POST", "/api/developer/apps", b"{not json", "invalid_json"),
    ("POST", "/api/developer/apps", b"[]", "invalid_json"),
    ("POST", "/api/developer/apps", b'{"name": 5}', "invalid_field"),
    ("POST", "/api/developer/apps", b'{"name": "x", "tags": "a"}', "invalid_field"),
    ("POST", "/api/developer/apps/game/products", b'{"slug": "a", "name": "A", '
     b'"priceAtomic": "-5"}', "invalid_amount"),
    ("POST", "/api/developer/apps/game/products", b'{"slug": "a", "name": "A", '
     b'"priceAtomic": 1.5}', "invalid_amount"),
    ("POST", "/api/developer/apps/game/products", b'{"slug": "a", "name": "A", '
     b'"priceAtomic": "10", "riskMode": "yolo"}', "invalid_field"),
    # Digits to str.isdigit, but not ours: "\u00b2" made int() fail (a 500), and the
    # Arabic-Indic "\u0661\u0660\u0660\u0660\u0660" was stored as "10000".
    *[("POST", "/api/developer/apps/game/products",
       json.dumps({"slug": "a", "name": "A", **fields}, ensure_ascii=False).encode(),
       "invalid_amount")
      for digits in ("\u00b2", "\u0661\u0660\u0660\u0660\u0660")
      for fields in ({"priceAtomic": digits},
                     {"priceAtomic": "10", "pricing": "dynamic_order",
                      "minAmountAtomic": digits, "maxAmountAtomic": "20"},
                     {"priceAtomic": "10", "riskPolicy": {"trustedServerCharge": {
                         "maxAmountAtomic": digits}}})],
    # A cap of 0 allows nothing: config refuses it too; "enabled": false says so.
    *[("POST", "/api/developer/apps/game/products",
       json.dumps({"slug": "a", "name": "A", "priceAtomic": "10", "riskPolicy": {
           "trustedServerCharge": {"enabled": True, "maxAmountAtomic": zero}}}).encode(),
       "invalid_amount") for zero in ("0", 0)],
    ("POST", "/api/developer/apps", b"x" * 70_000, "payload_too_large"),
])
def test_bad_input_gets_the_envelope(world: World, method: str, path: str, body: bytes,
                                     code: str) -> None:
    with world.console() as console:
        response = console.request(method, path, content=body,
                                   headers={"content-type": "application/json"})
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["code"] == code


def test_entry_url_and_distribution_targets_are_checked(world: World) -> None:
    """Spec 2.2: the Entry URL is the developer's own public URL (blank if none), and the
    distribution targets are a fixed set; anything else was once stored as given."""
    path = "/api/developer/apps/game"
    port = world.router.port
    refused: list[tuple[dict[str, Any], str, str]] = [
        ({"entryUrl": "javascript:alert(1)"}, "entry_url_invalid", "entryUrl"),
        ({"entryUrl": "game.example.com/play"}, "entry_url_invalid", "entryUrl"),
        ({"entryUrl": f"http://portal.localhost:{port}/game"}, "entry_url_invalid",
         "entryUrl"),
        ({"entryUrl": "http://other.apps.localhost/"}, "entry_url_invalid", "entryUrl"),
        ({"entryUrl": "http://169.254.169.254/"}, "entry_url_invalid", "entryUrl"),
        ({"distributionTargets": ["Nonsense", "<b>"]}, "invalid_field", "distributionTargets"),
        ({"distributionTargets": ["web"]}, "invalid_field", "distributionTargets"),
        ({"distributionTargets": ["Web", "Web"]}, "invalid_field", "distributionTargets"),
    ]
    with world.console() as console:
        for body, code, field in refused:
            answer = console.patch(path, json={"name": "Renamed", **body})
            assert answer.status_code == 422, (body, answer.text)
            assert (answer.json()["code"], answer.json()["field"]) == (code, field), body
        app = console.get(path).json()["app"]
        assert (app["name"], app["entryUrl"], app["distributionTargets"]) == ("Game", "", [])
        targets = ["Web", "PWA", "Telegram Mini App", "Farcaster Mini App", "Base"]
        changed = console.patch(path, json={"entryUrl": " http://localhost:5173/game ",
                                            "distributionTargets": targets})
        assert changed.status_code == 200, changed.text
        app = changed.json()["app"]
        assert (app["entryUrl"], app["distributionTargets"]) == (
            "http://localhost:5173/game", targets)
        # its own runtime host is the app's address once served; blank clears it
        own = console.patch(path, json={"entryUrl": "http://game.apps.localhost/play"})
        assert own.json()["app"]["entryUrl"] == "http://game.apps.localhost/play"
        cleared = console.patch(path, json={"entryUrl": "", "distributionTargets": []})
        assert (cleared.json()["app"]["entryUrl"], cleared.json()["app"]["distributionTargets"]
                ) == ("", [])


def test_wrong_content_type_and_no_auth(world: World) -> None:
    with world.console() as console:
        response = console.post("/api/developer/apps", content=b"name=x",
                                headers={"content-type": "application/x-www-form-urlencoded"})
        assert response.status_code == 415
    with world.api() as api:
        response = api.get("/api/developer/apps")
        assert response.status_code == 401
        assert response.json()["code"] == "developer_auth_required"
        key_like = api.get("/api/developer/apps", headers={"authorization": "Bearer zpk_x"})
        assert "not an API key" in key_like.json()["message"]


def test_grant_redeem_only_once_under_concurrency(sessions: sessionmaker[Session],
                                                  db_url: str) -> None:
    """Two pollers racing on an approved device code get one grant between them."""
    import threading
    developer_id, org_id = add_developer(sessions)
    app = add_owned_app(sessions, org_id, "game")
    with transaction(sessions) as session:
        started = grants.start_request(session, app_slug="game", scopes=None, ttl_seconds=None,
                                       now=utcnow())
        record = grants.pending_request(session, started.record.user_code, utcnow())
        owned = session.get(App, app.id)
        assert owned is not None
        grants.approve(record, developer_id=developer_id, app=owned)
    results: list[str] = []
    barrier = threading.Barrier(8)

    def poll() -> None:
        barrier.wait()
        try:
            with transaction(sessions) as session:
                grants.redeem(session, started.device_code, utcnow())
            results.append("granted")
        except ApiError as exc:
            results.append(exc.code)
        except Exception as exc:  # a serialization failure is also "not granted twice"
            results.append(type(exc).__name__)

    threads = [threading.Thread(target=poll) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count("granted") == 1
    with sessions() as session:
        assert len(session.scalars(select(CliGrant)).all()) == 1


def test_a_grant_is_not_an_api_key(world: World) -> None:
    """Handoffs, orders, charges, deliveries and receipts need a zpk_ key (spec 5.3): a
    valid grant with every scope it may hold is refused there, in either header."""
    token = world.grant("game", list(grants.CLI_SCOPES))
    key = "order-1-abcdefgh"
    requests = [("POST", "/api/orders", {"productId": "zprod_x", "developerUserId": "u",
                                         "idempotencyKey": key}),
                ("GET", "/api/orders/zord_x", None),
                ("GET", "/api/deliveries/ztdlv_x", None),
                ("GET", "/api/deliveries?idempotencyKey=k&app=game", None),
                ("GET", "/api/receipts/0x" + "0" * 64, None),
                ("POST", "/api/account-handoffs", {
                    "appSlug": "game", "merchantUserId": "u",
                    "returnUrl": "http://portal.localhost/game"}),
                ("POST", "/api/charges", {"productId": "zprod_x", "accountConnectionId": "zconn_x",
                                          "idempotencyKey": key})]
    with world.api() as api:
        assert api.get("/api/developer/me", headers={
            "authorization": f"Bearer {token}"}).status_code == 200  # the grant is valid
        for method, path, body in requests:
            for header in ({"authorization": f"Bearer {token}"}, {"x-svc-secret-key": token}):
                answer = api.request(method, path, json=body, headers=header)
                assert (answer.status_code, answer.json()["code"]) == (
                    401, "valid_api_key_required"), (method, path, header)
