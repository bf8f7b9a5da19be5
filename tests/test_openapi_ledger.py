"""The OpenAPI description of the payment endpoints is true of the running service.

``openapi.json`` is fetched from a real router's docs host; the real payment paths
(hosted entry, order, settled_first, account handoff + trusted-server charge, revoke) run
through the API host, and every answer, success or error, must be a response the
description lists, with a body its schema accepts. Success bodies are checked with
undocumented fields forbidden, so the description cannot fall behind the code.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker
from starlette.routing import Route

from payments.db import transaction, utcnow
from payments.developer.keys import create_key
from payments.ledger.openapi import ERROR_CODES
from payments.ledger.proofs import canonical_json
from payments.models import App
from payments.products import create_product
from payments.schemas import validator
from router.hosts import HostKind
from tests.ledger.flow import PARAMS, PayWorld, build_world, sign_owner_proof, sign_permit, wallet
from tests.support.router import RouterFactory, RunningRouter

ROOT = Path(__file__).resolve().parent.parent
LEDGER_PREFIXES = ("/api/authorizations/", "/api/pay/", "/api/orders", "/api/deliveries",
                   "/api/receipts/", "/api/account-handoffs", "/api/charges")


# -- the flow ----------------------------------------------------------------------------


@dataclass
class Exchange:
    path: str  # the OpenAPI path template
    method: str
    request: dict[str, Any] | None
    response: httpx.Response


class Recorder:
    """Calls the API host through the real router and keeps every request and answer."""

    def __init__(self, world: PayWorld) -> None:
        self.world = world
        self.seen: list[Exchange] = []

    def call(self, template: str, method: str, url: str, *, json_body: Any = None,
             headers: dict[str, str] | None = None, **kwargs: Any) -> httpx.Response:
        with self.world.api(**(headers or {})) as api:
            response = api.request(method, url, json=json_body, **kwargs)
        self.seen.append(Exchange(template, method.lower(), json_body, response))
        return response


def add_trusted_product(world: PayWorld) -> None:
    with transaction(world.sessions) as session:
        app = session.get(App, world.app.id)
        assert app is not None
        product = create_product(session, app, {
            "slug": "gems", "name": "Gem Pack", "priceAtomic": "20000",
            "riskPolicy": {"trustedServerCharge": {"enabled": True,
                                                   "maxAmountAtomic": "50000"}}})
        world.products[product.slug] = product


def narrow_key(world: PayWorld, scopes: list[str]) -> str:
    with transaction(world.sessions) as session:
        app = session.get(App, world.app.id)
        assert app is not None and app.organization_id is not None
        return create_key(session, organization_id=app.organization_id, app_id=app.id,
                          label="narrow", scopes=scopes, environment="test", created_by=None,
                          now=utcnow()).secret


def drive_every_path(world: PayWorld) -> list[Exchange]:
    """The three payment paths and their lookups, with the errors a client meets on the way."""
    add_trusted_product(world)
    rec = Recorder(world)
    user = wallet(31)
    slug, portal = world.app.slug, world.portal
    return_url = f"{portal}/{slug}"
    at_portal = {"origin": portal}
    keyed = {"authorization": f"Bearer {world.api_key}"}
    header_keyed = {"x-svc-secret-key": world.api_key}
    wallet_headers = {"x-wallet-address": user.address, "x-svc-budget-spender": PARAMS.spender}
    pay_path = "/api/pay/{app}/{product}"

    def exchange(summary_code: str, product: str, **extra: Any) -> str:
        response = rec.call("/api/authorizations/payment-code", "POST",
                            "/api/authorizations/payment-code", headers=at_portal, json_body={
                                "authorizationCode": summary_code,
                                "paymentUrl": world.payment_url(product),
                                "developerUserId": "user-1", **extra})
        assert response.status_code == 200, response.text
        code: str = response.json()["authorization"]["authorizationCode"]
        return code

    def pay(product: str, code: str, key: str, **extra: Any) -> httpx.Response:
        return rec.call(pay_path, "POST", f"/api/pay/{slug}/{product}",
                        headers={**at_portal, **wallet_headers}, json_body={
                            "authorizationCode": code, "developerUserId": "user-1",
                            "idempotencyKey": key, **extra})

    # Hosted entry: preflight, the portal's return-code, summary, exchange, pay.
    preflight = rec.call(pay_path, "OPTIONS", f"/api/pay/{slug}/retry", headers={
        **at_portal, "access-control-request-method": "POST"})
    assert preflight.status_code == 204
    refused = rec.call(pay_path, "OPTIONS", f"/api/pay/{slug}/retry", headers={
        "origin": "https://evil.example"})
    assert refused.status_code == 403
    returned = rec.call("/api/authorizations/return-code", "POST",
                        "/api/authorizations/return-code", headers=at_portal, json_body={
                            "app": slug, "returnUrl": return_url,
                            "permit": sign_permit(user, 1_000_000)})
    assert returned.status_code == 200, returned.text
    summary_code = returned.json()["code"]
    authorization_id = returned.json()["summary"]["authorizationId"]
    summary = rec.call("/api/authorizations/summary", "GET", "/api/authorizations/summary",
                       headers=at_portal, params={"code": summary_code})
    assert summary.status_code == 200
    unknown = rec.call("/api/authorizations/summary", "GET", "/api/authorizations/summary",
                       params={"code": "sum_nope"})
    assert unknown.status_code == 401
    code = exchange(summary_code, "retry")
    paid = pay("retry", code, "game:retry:1")
    assert paid.status_code == 201, paid.text
    assert paid.headers["access-control-allow-origin"] == portal
    assert pay("retry", code, "game:retry:1").json() == paid.json()
    consumed = pay("retry", code, "game:retry:2")
    assert consumed.json()["code"] == "AUTHORIZATION_CODE_CONSUMED"
    no_origin = rec.call("/api/authorizations/payment-code", "POST",
                         "/api/authorizations/payment-code", json_body={
                             "authorizationCode": summary_code,
                             "paymentUrl": world.payment_url("retry")})
    assert no_origin.json()["code"] == "PAYMENT_CODE_ORIGIN_REQUIRED"

    # Lookups: key as bearer and as x-svc-secret-key; no key; a key without the scope.
    delivery_id, charge = paid.json()["deliveryId"], paid.json()["chargeId"]
    assert rec.call("/api/deliveries/{delivery_id}", "GET", f"/api/deliveries/{delivery_id}",
                    headers=keyed).status_code == 200
    assert rec.call("/api/receipts/{charge_id}", "GET", f"/api/receipts/{charge}",
                    headers=header_keyed).status_code == 200
    assert rec.call("/api/deliveries/{delivery_id}", "GET",
                    f"/api/deliveries/{delivery_id}").status_code == 401
    by_key = rec.call("/api/deliveries", "GET", "/api/deliveries", headers=keyed,
                      params={"idempotencyKey": "game:retry:1"})
    assert by_key.json()["delivery"]["deliveryId"] == delivery_id
    assert rec.call("/api/deliveries", "GET", "/api/deliveries", headers=keyed,
                    params={"idempotencyKey": "game:retry:9"}).status_code == 404
    assert rec.call("/api/deliveries", "GET", "/api/deliveries",
                    headers=keyed).status_code == 422
    orders_only = {"authorization": f"Bearer {narrow_key(world, ['orders:read'])}"}
    assert rec.call("/api/receipts/{charge_id}", "GET", f"/api/receipts/{charge}",
                    headers=orders_only).status_code == 403
    assert rec.call("/api/receipts/{charge_id}", "GET", "/api/receipts/0x1",
                    headers=keyed).status_code == 404

    # Backend-created order for a dynamic-priced product, paid through the product route.
    tip = world.products["tip"]
    created = rec.call("/api/orders", "POST", "/api/orders", headers=keyed, json_body={
        "productId": tip.id, "developerUserId": "user-1", "idempotencyKey": "order-1",
        "amountAtomic": "25000"})
    assert created.status_code == 201, created.text
    order_id = created.json()["order"]["id"]
    clash = rec.call("/api/orders", "POST", "/api/orders", headers=keyed, json_body={
        "productId": tip.id, "developerUserId": "user-1", "idempotencyKey": "order-1",
        "amountAtomic": "26000"})
    assert clash.json()["code"] == "IDEMPOTENCY_KEY_REUSED"
    unordered = pay("tip", exchange(summary_code, "tip"), "game:tip:0")
    assert unordered.json()["code"] == "ORDER_REQUIRED"
    order_code = exchange(summary_code, "tip", orderId=order_id)
    paid_order = pay("tip", order_code, "game:tip:1", orderId=order_id)
    assert paid_order.status_code == 201, paid_order.text
    looked_up = rec.call("/api/orders/{order_id}", "GET", f"/api/orders/{order_id}",
                         headers=keyed)
    assert looked_up.json()["order"]["status"] == "paid"
    order_delivery = paid_order.json()["deliveryId"]
    assert rec.call("/api/deliveries/{delivery_id}", "GET", f"/api/deliveries/{order_delivery}",
                    headers=keyed).json()["delivery"]["orderId"] == order_id

    # settled_first: a delivery awaiting settlement, no event yet.
    scarce = pay("legendary", exchange(summary_code, "legendary"), "game:legendary:1")
    assert scarce.status_code == 201, scarce.text
    assert scarce.json()["status"] == "awaiting_settlement"
    assert scarce.json()["eventId"] is None

    # Account handoff: needs_connection, bind through the portal with the wallet's current
    # budget (owner proof), then ready; trusted-server charge with a paymentProof.
    handoff_body = {"appSlug": slug, "merchantUserId": "player-7", "gameAccountLabel": "Ana",
                    "emailHint": "ana@example.com", "returnUrl": return_url}
    first = rec.call("/api/account-handoffs", "POST", "/api/account-handoffs", headers=keyed,
                     json_body=handoff_body)
    assert first.json()["status"] == "needs_connection", first.text
    token = parse_qs(urlsplit(first.json()["handoff"]["portalUrl"]).query)["handoff"][0]
    bound = rec.call("/api/authorizations/return-code", "POST",
                     "/api/authorizations/return-code", headers=at_portal, json_body={
                         "app": slug, "returnUrl": return_url, "handoff": token,
                         "ownerProof": sign_owner_proof(user, slug, return_url,
                                                        authorization_id, links="Ana")})
    assert bound.status_code == 200, bound.text
    connection_id = bound.json()["summary"]["accountConnectionId"]
    ready = rec.call("/api/account-handoffs", "POST", "/api/account-handoffs", headers=keyed,
                     json_body=handoff_body)
    assert ready.json()["status"] == "ready", ready.text
    charge_body = {"productId": world.products["gems"].id, "accountConnectionId": connection_id,
                   "idempotencyKey": "trusted-1", "developerUserId": "player-7"}
    trusted = rec.call("/api/charges", "POST", "/api/charges", headers=keyed,
                       json_body=charge_body)
    assert trusted.status_code == 201, trusted.text
    proof = trusted.json()["paymentProof"]
    expected = hmac.new(world.api_key.encode(), canonical_json(proof["payload"]),
                        hashlib.sha256).hexdigest()
    assert hmac.compare_digest(proof["signature"], f"sha256={expected}")
    over = rec.call("/api/charges", "POST", "/api/charges", headers=keyed, json_body={
        **charge_body, "productId": world.products["legendary"].id,
        "idempotencyKey": "trusted-2"})
    assert over.json()["code"] == "TRUSTED_CHARGE_OVER_LIMIT"

    # Revoke: the budget is gone at once; payments and handoffs say so.
    revoked = rec.call("/api/authorizations/revoke", "POST", "/api/authorizations/revoke",
                       headers=at_portal, json_body={"permit": sign_permit(user, 0, nonce=1)})
    assert revoked.status_code == 200, revoked.text
    refused_pay = pay("retry", exchange(summary_code, "retry"), "game:retry:3")
    assert refused_pay.json()["code"] == "AUTHORIZATION_REVOKED"
    after = rec.call("/api/account-handoffs", "POST", "/api/account-handoffs", headers=keyed,
                     json_body=handoff_body)
    assert after.json()["status"] == "needs_budget"
    return rec.seen


# -- checking answers against the description ----------------------------------------------


def resolve(document: dict[str, Any], pointer: str) -> Any:
    assert pointer.startswith("#/"), pointer
    node: Any = document
    for part in pointer[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def inline(document: dict[str, Any], node: Any) -> Any:
    """``node`` with every local ``$ref`` replaced by what it points at (no cycles here)."""
    if isinstance(node, list):
        return [inline(document, item) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = inline(document, resolve(document, node["$ref"]))
        rest = {k: inline(document, v) for k, v in node.items() if k != "$ref"}
        return {"allOf": [target], **rest} if rest else target
    return {k: inline(document, v) for k, v in node.items()}


def strict(node: Any) -> Any:
    """Forbid properties a schema does not name, wherever it names some."""
    if isinstance(node, list):
        return [strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict(v) for k, v in node.items()}
    if isinstance(node.get("properties"), dict) and "additionalProperties" not in node:
        out["additionalProperties"] = False
    return out


def check_exchange(document: dict[str, Any], exchange: Exchange) -> None:
    where = f"{exchange.method.upper()} {exchange.path} -> {exchange.response.status_code}"
    operation = document["paths"][exchange.path][exchange.method]
    if exchange.request is not None:
        body_schema = operation["requestBody"]["content"]["application/json"]["schema"]
        errors = list(validator(strict(inline(document, body_schema))).iter_errors(
            exchange.request))
        assert not errors, f"{where}: request {[e.message for e in errors]}"
    response = operation["responses"].get(str(exchange.response.status_code))
    assert response is not None, f"{where}: status not described ({exchange.response.text})"
    if "content" not in response:
        return
    schema = inline(document, response["content"]["application/json"]["schema"])
    if exchange.response.status_code < 300:
        schema = strict(schema)
    errors = list(validator(schema).iter_errors(exchange.response.json()))
    assert not errors, f"{where}: {[f'{list(e.path)}: {e.message}' for e in errors]}"


def docs_client(router: RunningRouter) -> httpx.Client:
    return httpx.Client(base_url=router.url, timeout=30,
                        headers={"host": f"docs.localhost:{router.port}"})


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[PayWorld]:
    with start_router() as router:
        yield build_world(router, sessions)


def test_real_answers_match_the_description(world: PayWorld) -> None:
    with docs_client(world.router) as docs:
        served = docs.get("/openapi.json")
    assert served.status_code == 200
    document = served.json()
    assert document["openapi"] == "3.1.0"
    assert document["servers"] == [{"url": world.router.settings.base_url}]
    seen = drive_every_path(world)
    for exchange in seen:
        check_exchange(document, exchange)
    covered = {(e.path, e.method) for e in seen}
    for path, method in [("/api/authorizations/return-code", "post"),
                         ("/api/authorizations/summary", "get"),
                         ("/api/authorizations/payment-code", "post"),
                         ("/api/authorizations/revoke", "post"),
                         ("/api/pay/{app}/{product}", "post"),
                         ("/api/pay/{app}/{product}", "options"), ("/api/orders", "post"),
                         ("/api/orders/{order_id}", "get"),
                         ("/api/deliveries", "get"),
                         ("/api/deliveries/{delivery_id}", "get"),
                         ("/api/receipts/{charge_id}", "get"),
                         ("/api/account-handoffs", "post"), ("/api/charges", "post")]:
        assert (path, method) in covered


def test_every_ledger_route_and_method_is_described(world: PayWorld) -> None:
    api = world.router.service.hosts[HostKind.API]
    with docs_client(world.router) as docs:
        document = docs.get("/openapi.json").json()
    routes = [r for r in getattr(api, "routes", []) if isinstance(r, Route)
              and r.path.startswith(LEDGER_PREFIXES)]
    assert len(routes) >= 16
    for route in routes:
        for method in (route.methods or set()) - {"HEAD"}:
            operation = document["paths"][route.path].get(method.lower())
            assert operation is not None, f"{method} {route.path}"
            assert operation["responses"], f"{method} {route.path}"


# -- the description on its own ---------------------------------------------------------------


def _document() -> dict[str, Any]:
    from payments.openapi import openapi_document
    return openapi_document("http://api.localhost:8000")


def test_description_is_well_formed() -> None:
    document = _document()
    json.dumps(document)  # serializable as served
    for schema in document["components"]["schemas"].values():
        validator({}).check_schema(schema)
    operation_ids: list[str] = []
    for path, item in document["paths"].items():
        declared = {p["name"] for p in item.get("parameters", []) if p["in"] == "path"}
        for method, operation in item.items():
            if method == "parameters":
                continue
            operation_ids += [operation["operationId"]] if "operationId" in operation else []
            names = declared | {p["name"] for p in operation.get("parameters", [])
                                if p["in"] == "path"}
            assert names == set(re.findall(r"{(\w+)}", path)), f"{method} {path}"
            for status, response in operation["responses"].items():
                assert re.fullmatch(r"[1-5](?:\d\d|XX)", status), (path, status)
                assert response.get("description") or "$ref" in response, (path, status)
            for requirement in operation.get("security", []):
                assert set(requirement) <= set(document["components"]["securitySchemes"])
    assert len(operation_ids) == len(set(operation_ids))
    inline(document, document)  # every $ref resolves


def _documented_errors(document: dict[str, Any]) -> set[tuple[str, int]]:
    found: set[tuple[str, int]] = set()
    for path, item in document["paths"].items():
        if not path.startswith(LEDGER_PREFIXES):
            continue
        for method, operation in item.items():
            if method == "parameters":
                continue
            for status, response in operation["responses"].items():
                schema = response.get("content", {}).get("application/json", {}).get("schema",
                                                                                      {})
                for code in schema.get("properties", {}).get("code", {}).get("enum", []):
                    found.add((code, int(status)))
    return found


def test_every_error_the_ledger_raises_is_described_with_its_status() -> None:
    sources = [*sorted((ROOT / "payments" / "ledger").glob("*.py")), ROOT / "payments/http.py"]
    raised: set[tuple[str, int]] = set()
    for source in sources:
        text = source.read_text()
        raised |= {(code, int(status)) for code, status in
                   re.findall(r'ApiError\(\s*"([^"]+)",\s*(\d{3})', text)}
    raised |= {("valid_api_key_required", 401), ("api_key_scope_missing", 403)}
    assert len(raised) > 40
    documented = _documented_errors(_document())
    assert raised - documented == set()
    # ... and nothing is described that the code cannot answer.
    all_code = "".join(p.read_text() for p in [*sources, ROOT / "payments/developer/keys.py",
                                                ROOT / "payments/errors.py"])
    for code in ERROR_CODES:
        assert f'"{code}"' in all_code, code
