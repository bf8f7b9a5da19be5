"""The webhook event schema (spec 2.1): valid JSON Schema 2020-12, served by the docs host,
true of every event the real payment paths write, and false of tampered ones."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.apps import DISTRIBUTION_TARGETS
from payments.ledger.models import WebhookEvent
from payments.schemas import (
    CONFIG,
    MEDIA_TYPE,
    WEBHOOK_EVENT,
    ecma_pattern,
    is_date_time,
    load_schema,
    published_schema,
    validator,
)
from tests.ledger.flow import PayWorld, build_world
from tests.support.router import RouterFactory
from tests.test_openapi_ledger import docs_client, drive_every_path

DIALECT = "https://json-schema.org/draft/2020-12/schema"
REQUIRED = {"id", "type", "test", "createdAt", "app", "product", "payment", "delivery"}


def object_schemas(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            yield node
        for value in node.values():
            yield from object_schemas(value)
    elif isinstance(node, list):
        for item in node:
            yield from object_schemas(item)


def test_schema_is_valid_2020_12() -> None:
    schema = load_schema(WEBHOOK_EVENT)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == DIALECT
    assert set(schema["required"]) == REQUIRED
    objects = list(object_schemas(schema))
    assert len(objects) == 5  # the event, app, product, payment, delivery
    assert all(o.get("additionalProperties", True) is not False for o in objects)
    props = schema["properties"]
    assert props["id"]["pattern"] == "^zevt_"
    assert props["delivery"]["properties"]["deliveryId"]["pattern"] == "^ztdlv_"
    assert set(props["type"]["enum"]) == {"payment.delivered", "delivery.created",
                                          "payment.settled"}
    assert props["payment"]["properties"]["settlementStatus"]["enum"] == [
        "queued", "settling", "settled", "failed"]
    assert set(props["delivery"]["required"]) == {"deliveryId", "idempotencyKey", "status",
                                                  "fulfilled"}


def test_config_schema_holds_the_apis_app_rules() -> None:
    """The published config schema and the API share the target set and the cap's types."""
    schema = load_schema(CONFIG)
    Draft202012Validator.check_schema(schema)
    app = schema["properties"]["app"]["properties"]
    assert tuple(app["distributionTargets"]["items"]["enum"]) == DISTRIBUTION_TARGETS
    check = validator({**app["entryUrl"], "$schema": DIALECT})
    assert check.is_valid("") and check.is_valid("https://game.example.com/play")
    assert not check.is_valid("javascript:alert(1)") and not check.is_valid("game.example")
    product = schema["properties"]["products"]["items"]["properties"]
    cap = validator({**product["riskPolicy"]["properties"]["trustedServerCharge"][
        "properties"]["maxAmountAtomic"], "$schema": DIALECT})
    assert all(cap.is_valid(v) for v in ("50000", 50000, None, 2**63 - 1))
    assert not any(cap.is_valid(v) for v in ("0", 0, -1, True, 2**63, "5e4", "50000.5"))


@pytest.mark.parametrize(("pattern", "text", "matches"), [
    ("^[1-9][0-9]*$", "100", True), ("^[1-9][0-9]*$", "100\n", False),
    ("^a$|^b$", "a\n", False), ("^a$|^b$", "b", True),
    ("^[$]+$", "$$", True), ("^[$]+$", "$$\n", False),  # a $ in a class is a dollar
    ("^\\$5$", "$5", True), ("(^|/)\\.\\.?(/|$)", "/a/..", True),
    ("(^|/)\\.\\.?(/|$)", "/a/..\n", False),
])
def test_patterns_read_as_ecma_262(pattern: str, text: str, matches: bool) -> None:
    assert bool(ecma_pattern(pattern).search(text)) is matches
    check = validator({"$schema": DIALECT, "type": "string", "pattern": pattern})
    assert check.is_valid(text) is matches


def test_published_copy_names_its_address() -> None:
    served = published_schema(WEBHOOK_EVENT, "https://docs.example/")
    assert list(served)[:2] == ["$schema", "$id"]
    assert served["$id"] == "https://docs.example/webhook-event.schema.json"
    Draft202012Validator.check_schema(served)


@pytest.mark.parametrize(("value", "valid"), [
    ("2026-01-02T03:04:05Z", True), ("2026-01-02T03:04:05.123456+00:00", True),
    ("2026-01-02 03:04:05Z", False), ("2026-01-02T03:04:05", False),
    ("2026-13-02T03:04:05Z", False), ("yesterday", False),
    ("2026-01-02T03:04:0\u0665Z", False),  # an Arabic-Indic 5: a digit, not an RFC 3339 one
])
def test_date_time_format_is_checked(value: str, valid: bool) -> None:
    assert is_date_time(value) is valid


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[PayWorld]:
    with start_router() as router:
        yield build_world(router, sessions)


def fetched_schema(world: PayWorld) -> dict[str, Any]:
    with docs_client(world.router) as docs:
        response = docs.get(f"/{WEBHOOK_EVENT}")
        head = docs.head(f"/{WEBHOOK_EVENT}")
    assert response.status_code == 200
    assert head.status_code == 200
    assert response.headers["content-type"].split(";")[0] == MEDIA_TYPE
    schema: dict[str, Any] = response.json()
    assert schema["$id"] == f"{world.router.settings.docs_url}/{WEBHOOK_EVENT}"
    Draft202012Validator.check_schema(schema)
    assert {k: v for k, v in schema.items() if k != "$id"} == load_schema(WEBHOOK_EVENT)
    return schema


def events(world: PayWorld) -> list[dict[str, Any]]:
    with world.sessions() as session:
        return [dict(e.payload) for e in session.scalars(
            select(WebhookEvent).order_by(WebhookEvent.created_at))]


def test_every_emitted_event_matches_the_served_schema(world: PayWorld) -> None:
    schema = fetched_schema(world)
    drive_every_path(world)
    written = events(world)
    # Optimistic hosted-entry pay, order pay, trusted charge; settled_first waits.
    assert len(written) == 3
    check = validator(schema)
    for event in written:
        errors = [f"{list(e.path)}: {e.message}" for e in check.iter_errors(event)]
        assert not errors, (event["id"], errors)
    assert {e["product"]["paymentPath"] for e in written} == {"product_route",
                                                              "trusted_server"}
    assert sum("orderId" in e["delivery"] for e in written) == 1
    assert all(e["type"] == "payment.delivered" and e["test"] is False for e in written)

    # The shape with only what is required, and every optional value null, still holds
    # (a test webhook corresponds to no charge).
    minimal = copy.deepcopy(written[0])
    for part in ("app", "product", "payment", "delivery"):
        required = set(schema["properties"][part]["required"])
        for name, rule in schema["properties"][part]["properties"].items():
            if name in required:
                continue
            if "null" in rule.get("type", []):
                minimal[part][name] = None
            else:
                minimal[part].pop(name, None)
    minimal["test"] = True
    minimal["extra"] = {"anything": "goes"}  # additional properties at every level
    minimal["delivery"]["extra"] = 1
    assert not list(check.iter_errors(minimal))


Tamper = Callable[[dict[str, Any]], None]


def _drop(part: str, name: str) -> Tamper:
    return lambda event: event[part].pop(name)


def _set(part: str | None, name: str, value: Any) -> Tamper:
    def apply(event: dict[str, Any]) -> None:
        (event[part] if part else event)[name] = value
    return apply


TAMPERED: dict[str, Tamper] = {
    "no delivery.deliveryId": _drop("delivery", "deliveryId"),
    "id without zevt_": _set(None, "id", "evt_123"),
    "delivery id without ztdlv_": _set("delivery", "deliveryId", "dlv_1"),
    "unknown type": _set(None, "type", "payment.refunded"),
    "test not boolean": _set(None, "test", "false"),
    "createdAt not a date-time": _set(None, "createdAt", "yesterday"),
    "priceAtomic a decimal": _set("product", "priceAtomic", "0.01"),
    "priceAtomic a number": _set("product", "priceAtomic", 10000),
    "unknown settlement status": _set("payment", "settlementStatus", "done"),
    "app.payTo a number": _set("app", "payTo", 1),
    "fulfilled missing": _drop("delivery", "fulfilled"),
    "no app": lambda event: event.pop("app"),
    "app without slug": _drop("app", "slug"),
    "chargeId not hex": _set("delivery", "chargeId", "charge-1"),
    "deliveredAt not a date-time": _set("delivery", "deliveredAt", "2026-01-02"),
}


def test_tampered_events_fail(world: PayWorld) -> None:
    drive_every_path(world)
    original = events(world)[0]
    check = validator(load_schema(WEBHOOK_EVENT))
    assert not list(check.iter_errors(original))
    for name, tamper in TAMPERED.items():
        event = copy.deepcopy(original)
        tamper(event)
        assert list(check.iter_errors(event)), name
    both = copy.deepcopy(original)
    del both["delivery"]["deliveryId"]
    both["id"] = "evt_" + both["id"].removeprefix("zevt_")
    failures = {(tuple(e.path), e.validator) for e in check.iter_errors(both)}
    assert failures == {(("delivery",), "required"), (("id",), "pattern")}
