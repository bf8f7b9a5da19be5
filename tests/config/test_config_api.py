"""The configuration API (spec 4.8) against the real router, on SQLite and PostgreSQL:
plan, apply, revisions and rollback, with a console session and with CLI grants. Every
answer is checked against the OpenAPI description."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from payments.config.document import WITHHELD
from payments.config.models import ConfigRevision
from payments.db import transaction
from payments.models import App, Product, ProductStatus
from payments.webhooks.models import EndpointStatus, WebhookEndpoint
from tests.developer.test_api import World
from tests.factories import add_developer, add_owned_app
from tests.test_openapi_ledger import Exchange, check_exchange

P = "/api/developer/config"
PAY_TO = "0x" + "ab" * 20
HOOK = "http://127.0.0.1:9/api/svc/webhook"


def config(slug: str = "arcade", **overrides: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "schemaVersion": "svc.config.v1", "environment": "test",
        "app": {"slug": slug, "name": "Arcade", "kind": "game", "payTo": PAY_TO,
                "tags": ["arcade"], "distributionTargets": ["Web"]},
        "products": [
            {"slug": "retry", "name": "Retry", "priceAtomic": "10000"},
            {"slug": "skin", "sku": "skin-1", "name": "Skin", "priceAtomic": "250000",
             "riskMode": "settled_first",
             "riskPolicy": {"trustedServerCharge": {"enabled": True,
                                                    "paymentProofRequired": True,
                                                    "maxAmountAtomic": "300000"}},
             "fulfillmentAdapter": "webhook", "fulfillmentConfig": {"item": "skin"}},
        ],
        "webhooks": [{"url": HOOK, "events": ["payment.delivered", "payment.settled"]}],
        "runtime": {"mode": "worker_quick_launch", "origin": "http://127.0.0.1:9"},
        "metadata": {"owner": "team-a"},
    }
    document.update(overrides)
    return document


@dataclass
class Api:
    """A caller of the config API whose every answer is checked against the description."""

    client: httpx.Client
    document: dict[str, Any]

    def call(self, method: str, path: str, template: str, body: Any = None,
             *, valid_request: bool = True, **params: str) -> httpx.Response:
        """Call and check the answer; the request too unless it is meant to be invalid."""
        answer = self.client.request(method, path, json=body, params=params or None)
        check_exchange(self.document, Exchange(template, method.lower(),
                                               body if valid_request else None, answer))
        return answer

    def plan(self, document: dict[str, Any], mode: str = "merge") -> dict[str, Any]:
        answer = self.call("POST", f"{P}/plan", f"{P}/plan", {"config": document, "mode": mode})
        assert answer.status_code == 200, answer.text
        plan: dict[str, Any] = answer.json()
        return plan

    def apply(self, document: dict[str, Any], mode: str = "merge",
              base: str | None = None, *, planned: bool = True) -> httpx.Response:
        body: dict[str, Any] = {"config": document, "mode": mode, "baseRevision": base}
        if planned:
            plan = self.plan(document, mode)
            body["baseRevision"], body["planDigest"] = plan["baseRevision"], plan["digest"]
        return self.call("POST", f"{P}/apply", f"{P}/apply", body)

    def revisions(self, app: str) -> list[dict[str, Any]]:
        answer = self.call("GET", f"{P}/revisions", f"{P}/revisions", app=app)
        assert answer.status_code == 200, answer.text
        found: list[dict[str, Any]] = answer.json()["revisions"]
        return found


@pytest.fixture
def console(world: World, description: dict[str, Any]) -> Iterator[Api]:
    with world.console() as client:
        yield Api(client, description)


def ops_of(result: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["resource"], o["key"]): o for o in result["ops"]}


def test_apply_from_an_empty_organization_creates_everything_and_again_changes_nothing(
        world: World, console: Api) -> None:
    document = config()
    plan = console.plan(document)
    assert plan["baseRevision"] is None and plan["errors"] == []
    assert plan["summary"] == {"create": 5, "update": 0, "disable": 0, "unchanged": 0}
    assert {(o["resource"], o["op"]) for o in plan["ops"]} == {
        ("app", "create"), ("runtime", "create"), ("product", "create"), ("webhook", "create")}
    assert [s["name"] for s in plan["missingSecrets"]] == ["SVC_WEBHOOK_SECRET", "SVC_API_KEY"]
    assert plan["runtimeValidation"]["manifestUrl"] == "http://127.0.0.1:9/.well-known/svc.json"
    assert plan["runtimeValidation"]["expected"]["webhookPath"] == "/api/svc/webhook"
    with world.sessions() as session:  # a plan writes nothing
        assert session.scalar(select(App).where(App.slug == "arcade")) is None

    applied = console.apply(document)
    assert applied.status_code == 201, applied.text
    result = applied.json()
    assert applied.headers["cache-control"] == "no-store"
    secret = result["secrets"]["webhookSigningSecret"]
    assert secret.startswith("zwhsec_")
    assert result["revision"]["number"] == 1 and result["revision"]["via"] == "console"
    assert set(result["ids"]["products"]) == {"retry", "skin"}
    with world.sessions() as session:
        app = session.scalar(select(App).where(App.slug == "arcade"))
        assert app is not None and app.organization_id == world.org_id
        assert (app.pay_to, app.tags, app.distribution_targets) == (PAY_TO, ["arcade"], ["Web"])
        assert app.runtime_origin == "http://127.0.0.1:9"
        skin = session.scalar(select(Product).where(Product.app_id == app.id,
                                                    Product.slug == "skin"))
        assert skin is not None and skin.price_atomic == 250_000 and skin.sku == "skin-1"
        assert skin.trusted_charge_enabled and skin.trusted_charge_max_atomic == 300_000
        assert result["ids"]["products"]["skin"] == skin.id
        hook = session.scalar(select(WebhookEndpoint).where(WebhookEndpoint.app_id == app.id))
        assert hook is not None and hook.events == ["payment.delivered", "payment.settled"]
        stored = session.scalars(select(ConfigRevision)).all()
        assert len(stored) == 1 and secret not in str(stored[0].config) + str(stored[0].ops)

    again = console.apply(document)
    assert again.status_code == 200, again.text
    assert again.json()["revision"] is None and "secrets" not in again.json()
    assert again.json()["summary"]["unchanged"] == 5
    assert [r["number"] for r in console.revisions("arcade")] == [1]


def test_a_price_edit_plans_as_an_update_and_applies_only_that(world: World,
                                                                console: Api) -> None:
    assert console.apply(config()).status_code == 201
    edited = copy.deepcopy(config())
    edited["products"][0]["priceAtomic"] = "20000"
    plan = console.plan(edited)
    changed = [o for o in plan["ops"] if o["op"] != "unchanged"]
    assert changed == [{"op": "update", "resource": "product", "key": "retry",
                        "id": changed[0]["id"], "changes": [
                            {"field": "priceAtomic", "before": "10000", "after": "20000"}]}]
    applied = console.apply(edited)
    assert applied.status_code == 201 and applied.json()["revision"]["number"] == 2
    with world.sessions() as session:
        retry = session.get(Product, changed[0]["id"])
        assert retry is not None and retry.price_atomic == 20_000


def test_fields_left_out_are_left_alone_webhook_events_included(world: World,
                                                                  console: Api) -> None:
    assert console.apply(config()).status_code == 201  # events: delivered and settled
    bare = config(webhooks=[{"url": HOOK}])
    for product in bare["products"]:
        product.pop("riskMode", None)
    plan = console.plan(bare)
    assert [o for o in plan["ops"] if o["op"] != "unchanged"] == []
    with world.sessions() as session:
        endpoint = session.scalars(select(WebhookEndpoint)).one()
        assert sorted(endpoint.events) == ["payment.delivered", "payment.settled"]


def test_merge_warns_about_undeclared_resources_and_mirror_disables_them(
        world: World, console: Api) -> None:
    assert console.apply(config()).status_code == 201
    smaller = config(products=[{"slug": "retry", "name": "Retry", "priceAtomic": "10000"}],
                     webhooks=[])
    merge = console.plan(smaller, "merge")
    assert {(w["code"], w["key"]) for w in merge["warnings"]} == {
        ("undeclared_product", "skin"), ("undeclared_webhook", HOOK)}
    assert merge["summary"]["disable"] == 0
    mirror = console.plan(smaller, "mirror")
    assert mirror["warnings"] == []
    assert {(o["resource"], o["key"]) for o in mirror["ops"] if o["op"] == "disable"} == {
        ("product", "skin"), ("webhook", HOOK)}
    assert console.apply(smaller, "mirror").status_code == 201
    with world.sessions() as session:
        skin = session.scalar(select(Product).where(Product.slug == "skin"))
        hook = session.scalar(select(WebhookEndpoint))
        assert skin is not None and skin.status is ProductStatus.DISABLED
        assert hook is not None and hook.status is EndpointStatus.DISABLED
    # Declared again, both come back, and the endpoint keeps its secret (no new one).
    back = console.apply(config())
    assert back.status_code == 201 and "secrets" not in back.json()
    assert ops_of(back.json())[("product", "skin")]["changes"] == [
        {"field": "status", "before": "disabled", "after": "active"}]


def test_rollback_applies_an_earlier_revision_as_a_new_one(world: World, console: Api) -> None:
    first = console.apply(config()).json()["revision"]
    edited = config(app={**config()["app"], "name": "Arcade Deluxe"})
    second = console.apply(edited).json()["revision"]
    detail = console.call("GET", f"{P}/revisions/{first['id']}", f"{P}/revisions/{{revision}}")
    assert detail.status_code == 200 and detail.json()["revision"]["config"] == config()
    answer = console.call("POST", f"{P}/rollback", f"{P}/rollback",
                          {"revision": first["id"], "baseRevision": second["id"]})
    assert answer.status_code == 201, answer.text
    rolled = answer.json()
    assert rolled["revision"]["number"] == 3 and rolled["revision"]["rollbackOf"] == first["id"]
    assert ops_of(rolled)[("app", "arcade")]["changes"] == [
        {"field": "name", "before": "Arcade Deluxe", "after": "Arcade"}]
    with world.sessions() as session:
        app = session.scalar(select(App).where(App.slug == "arcade"))
        assert app is not None and app.name == "Arcade"
    history = console.revisions("arcade")
    assert [(r["number"], r["appliedBy"]["username"]) for r in history] == [
        (3, "dev1"), (2, "dev1"), (1, "dev1")]

    # Paged by number: an apply landing between two pages shifts nothing on the older page.
    path = f"{P}/revisions"
    page = console.call("GET", path, path, app="arcade", limit="2").json()
    assert [r["number"] for r in page["revisions"]] == [3, 2] and page["nextBefore"] == 2
    assert console.apply(config(app={**config()["app"], "name": "Four"})).status_code == 201
    older = console.call("GET", path, path, app="arcade", limit="2",
                         before=str(page["nextBefore"])).json()
    assert [r["number"] for r in older["revisions"]] == [1] and older["nextBefore"] is None
    whole = console.call("GET", path, path, app="arcade").json()
    assert [r["number"] for r in whole["revisions"]] == [4, 3, 2, 1]
    assert whole["nextBefore"] is None
    # "\u00b2" is a digit to str.isdigit() but not to int() (a 500 once); Arabic-Indic digits
    # are read by int() but are not the wire's digits.
    for bad in ({"limit": "0"}, {"limit": "201"}, {"limit": "x"}, {"before": "0"},
                {"before": "-1"}, {"before": "9" * 30}, {"limit": "\u00b2"},
                {"limit": "\u0661\u0660"}, {"before": "\u00b2"}, {"before": "\u0661"},
                {"before": "1" * 5000}):
        refused = console.call("GET", path, path, valid_request=False, app="arcade", **bad)
        assert refused.status_code == 422, (bad, refused.text)
        assert refused.json()["code"] == "invalid_field"
        assert refused.json()["field"] == next(iter(bad))


def test_an_apply_against_an_old_revision_is_a_conflict_and_changes_nothing(
        world: World, console: Api) -> None:
    first = console.apply(config()).json()["revision"]["id"]
    console.apply(config(app={**config()["app"], "name": "Two"}))
    late = console.apply(config(app={**config()["app"], "name": "Three"}), base=first,
                         planned=False)
    assert late.status_code == 409 and late.json()["code"] == "config_conflict"
    with world.sessions() as session:
        app = session.scalar(select(App).where(App.slug == "arcade"))
        assert app is not None and app.name == "Two"
    stale = console.plan(config(app={**config()["app"], "name": "Four"}))
    with world.sessions() as session, session.begin():  # changed outside config
        product = session.scalar(select(Product).where(Product.slug == "retry"))
        assert product is not None
        product.price_atomic = 55_000
    answer = console.call("POST", f"{P}/apply", f"{P}/apply", {
        "config": config(app={**config()["app"], "name": "Four"}),
        "baseRevision": stale["baseRevision"], "planDigest": stale["digest"]})
    assert answer.status_code == 409 and answer.json()["code"] == "config_plan_stale"


def test_two_concurrent_applies_on_one_revision_land_exactly_once(
        world: World, console: Api, db_url: str) -> None:
    base = console.apply(config()).json()["revision"]["id"]
    answers: list[httpx.Response] = []
    barrier = threading.Barrier(2)

    def apply(name: str) -> None:
        with world.console() as client:
            barrier.wait()
            answers.append(client.post(f"{P}/apply", json={
                "config": config(app={**config()["app"], "name": name}),
                "baseRevision": base}))

    threads = [threading.Thread(target=apply, args=(n,)) for n in ("Left", "Right")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(a.status_code for a in answers) == [201, 409], [a.text for a in answers]
    winner = next(a for a in answers if a.status_code == 201).json()
    loser = next(a for a in answers if a.status_code == 409).json()
    assert loser["code"] == "config_conflict"
    with world.sessions() as session:
        app = session.scalar(select(App).where(App.slug == "arcade"))
        assert app is not None
        assert app.name == ops_of(winner)[("app", "arcade")]["changes"][0]["after"]
        numbers = session.scalars(select(ConfigRevision.number)).all()
        assert sorted(numbers) == [1, 2]


SECRETS: dict[str, tuple[str, Any, str]] = {
    "an API key": ("metadata", {"note": "zpk_" + "a" * 40}, "$.metadata.note"),
    "a webhook secret": ("metadata", {"hook": "zwhsec_" + "b" * 40}, "$.metadata.hook"),
    "a private key": ("metadata", {"deployer": "0x" + "1f" * 32}, "$.metadata.deployer"),
    "a PEM key": ("metadata", {"pem": "-----BEGIN PRIVATE KEY-----\nMII"}, "$.metadata.pem"),
    "a password": ("metadata", {"dbPassword": "hunter22"}, "$.metadata.dbPassword"),
    "a token": ("products", [{"slug": "retry", "name": "Retry", "priceAtomic": "1",
                              "fulfillmentConfig": {"access_token": "abc"}}],
                "$.products[0].fulfillmentConfig.access_token"),
    "a bearer header": ("metadata", {"auth": "Bearer eyJhbGciOiJIUzI1NiJ9.e30.x"},
                        "$.metadata.auth"),
    # Credentials riding in URLs, in any string: a password in the user part, a signed
    # URL's signature, a token in a query or a fragment, a key in a URL used as a key.
    "a password in a URL": ("metadata", {"db": "postgres://game:hunter22@db.example.com/x"},
                            "$.metadata.db"),
    "a signed URL": ("products", [{
        "slug": "retry", "name": "Retry", "priceAtomic": "1", "fulfillmentConfig": {
            "image": "https://cdn.example.com/a.png?X-Amz-Date=1&X-Amz-Signature=hunter22"}}],
        "$.products[0].fulfillmentConfig.image"),
    "a token in a webhook URL": ("webhooks", [{"url": "https://game.example.com/hook?"
                                                     "token=hunter22"}], "$.webhooks[0].url"),
    "a token in a fragment": ("metadata", {"docs": ["see https://game.example.com/cb"
                                                    "#access_token=hunter22 for it"]},
                              "$.metadata.docs[0]"),
    "a URL as a key": ("metadata", {"mirrors": {"https://ops:hunter22@game.example.com/": 1}},
                       "$.metadata.mirrors"),
    # The mark of a withheld secret, copied from a revision: it stands for a value not there.
    "a withheld mark": ("webhooks", [{"url": f"https://game.example.com/hook?token={WITHHELD}"}],
                        "$.webhooks[0].url"),
}


def _leaves(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value] if isinstance(value, str) and len(value) > 2 else []


@pytest.mark.parametrize("kind", list(SECRETS))
def test_the_secret_guard_refuses_each_kind_with_its_path(world: World, console: Api,
                                                          kind: str) -> None:
    where, value, path = SECRETS[kind]
    document = config(**{where: value})
    for answer in (console.call("POST", f"{P}/plan", f"{P}/plan", {"config": document}),
                   console.call("POST", f"{P}/apply", f"{P}/apply",
                                {"config": document, "baseRevision": None})):
        assert answer.status_code == 422
        error = answer.json()
        assert error["code"] == "config_contains_secret"
        assert [e["path"] for e in error["errors"]] == [path]
        assert not [leaf for leaf in _leaves(value) if leaf in answer.text]  # never echoed
        assert "hunter22" not in answer.text  # nor a secret riding in a URL, a key's too
    with world.sessions() as session:
        assert session.scalar(select(App).where(App.slug == "arcade")) is None


def test_the_product_api_refuses_what_config_refuses(world: World, console: Api) -> None:
    """Product fields are config fields (spec 2.9), and revisions record the products as an
    apply leaves them: the product API takes no secret either, in the same envelope."""
    console.apply(config())
    products = "/api/developer/apps/arcade/products"
    signed = {"image": "https://cdn.example.com/a.png?X-Goog-Signature=hunter22"}
    for method, path, template, body in (
            ("POST", products, "/api/developer/apps/{app}/products",
             {"slug": "gem", "name": "Gem", "priceAtomic": "5", "fulfillmentConfig": signed}),
            ("PATCH", f"{products}/skin", "/api/developer/apps/{app}/products/{product}",
             {"fulfillmentConfig": {"note": "ok", "links": [signed]}})):
        answer = console.call(method, path, template, body)
        assert answer.status_code == 422, answer.text
        error = answer.json()
        assert error["code"] == "config_contains_secret" and "hunter22" not in answer.text
        assert [e["path"] for e in error["errors"]] == [
            "$.fulfillmentConfig.image" if method == "POST"
            else "$.fulfillmentConfig.links[0].image"]
    with world.sessions() as session:
        assert session.scalar(select(Product).where(Product.slug == "gem")) is None
        skin = session.scalars(select(Product).where(Product.slug == "skin")).one()
        assert skin.fulfillment_config == {"item": "skin"}
    kept = console.call("PATCH", f"{products}/skin",
                        "/api/developer/apps/{app}/products/{product}",
                        {"fulfillmentConfig": {"image": "https://cdn.example.com/a.png"}})
    assert kept.status_code == 200, kept.text


def test_schema_and_rule_errors_name_their_json_paths(world: World, console: Api) -> None:
    bad = config()
    bad["products"][0]["priceAtomic"] = "1.5"
    bad["products"][1]["color"] = "red"
    bad["app"]["kind"] = "toy"
    answer = console.call("POST", f"{P}/plan", f"{P}/plan", {"config": bad},
                          valid_request=False)
    assert answer.status_code == 422 and answer.json()["code"] == "config_invalid"
    paths = {e["path"] for e in answer.json()["errors"]}
    assert {"$.products[0].priceAtomic", "$.products[1]", "$.app.kind"} <= paths
    twice = config()
    twice["products"].append({"slug": "retry", "name": "Again", "priceAtomic": "5"})
    answer = console.call("POST", f"{P}/plan", f"{P}/plan", {"config": twice})
    assert [e["path"] for e in answer.json()["errors"]] == ["$.products[2].slug"]
    refused = config(webhooks=[{"url": "http://example.com/hook"}],
                     runtime={"mode": "worker_quick_launch", "origin": "ftp://x"})
    plan = console.plan(refused)
    assert {e["path"] for e in plan["errors"]} == {"$.webhooks[0].url", "$.runtime.origin"}
    blocked = console.call("POST", f"{P}/apply", f"{P}/apply",
                           {"config": refused, "baseRevision": None})
    assert blocked.status_code == 422 and blocked.json()["code"] == "config_plan_errors"
    for body in ({}, {"config": config(), "mode": "replace", "baseRevision": None},
                 {"config": config()}):
        answer = console.client.post(f"{P}/apply", json=body)
        assert answer.status_code == 422, answer.text


def _trusted_cap(document: dict[str, Any], cap: Any) -> dict[str, Any]:
    document["products"][1]["riskPolicy"]["trustedServerCharge"]["maxAmountAtomic"] = cap
    return document


def _skin(plan: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = next(o for o in plan["ops"] if o["key"] == "skin")
    return op


def test_a_numeric_trusted_charge_cap_plans_and_applies_as_its_string(
        world: World, console: Api) -> None:
    """Spec 2.3 types the cap "string/number or null", as the product API takes it."""
    numeric = _trusted_cap(config(), 300000)
    plan = console.plan(numeric)
    assert plan["errors"] == []
    assert {"field": "riskPolicy.trustedServerCharge.maxAmountAtomic", "before": None,
            "after": "300000"} in _skin(plan)["changes"]
    assert console.apply(numeric).status_code == 201
    with world.sessions() as session:
        skin = session.scalars(select(Product).where(Product.slug == "skin")).one()
        assert skin.trusted_charge_max_atomic == 300_000
    # The string and the number are one value: neither plans a change after the other.
    assert _skin(console.plan(config()))["op"] == "unchanged"
    assert _skin(console.plan(numeric))["op"] == "unchanged"
    changed = console.plan(_trusted_cap(config(), 400000))
    assert _skin(changed)["changes"] == [{
        "field": "riskPolicy.trustedServerCharge.maxAmountAtomic", "before": "300000",
        "after": "400000"}]
    assert _skin(console.plan(_trusted_cap(config(), None)))["changes"][0]["after"] is None


@pytest.mark.parametrize("cap", [True, 0, -1, 2**63, "0", "300000.0", {"v": 1}])
def test_a_trusted_charge_cap_that_is_not_a_positive_whole_number_is_invalid(
        console: Api, cap: Any) -> None:
    answer = console.call("POST", f"{P}/plan", f"{P}/plan",
                          {"config": _trusted_cap(config(), cap)}, valid_request=False)
    assert answer.status_code == 422 and answer.json()["code"] == "config_invalid", cap
    assert [e["path"] for e in answer.json()["errors"]] == [
        "$.products[1].riskPolicy.trustedServerCharge.maxAmountAtomic"]


@pytest.mark.parametrize("cap", [300000.0, 5e4])
def test_a_trusted_charge_cap_is_never_read_from_a_float(console: Api, cap: float) -> None:
    """JSON Schema counts 300000.0 as an integer; the product rules do not, as in the API."""
    plan = console.plan(_trusted_cap(config(), cap))
    assert [(e["path"], e["code"]) for e in plan["errors"]] == [
        ("$.products[1].riskPolicy.trustedServerCharge.maxAmountAtomic", "invalid_amount")]


def test_app_entry_url_and_distribution_targets_follow_the_api_rules(
        world: World, console: Api) -> None:
    portal = world.router.settings.portal_url
    cases: list[tuple[dict[str, Any], str, str]] = [
            ({"entryUrl": "javascript:alert(1)"}, "$.app.entryUrl", "config_invalid"),
            ({"distributionTargets": ["Nonsense"]}, "$.app.distributionTargets[0]",
             "config_invalid"),
            ({"distributionTargets": ["Web", "Web"]}, "$.app.distributionTargets",
             "config_invalid")]
    for fields, path, code in cases:
        answer = console.call("POST", f"{P}/plan", f"{P}/plan",
                              {"config": config(app={**config()["app"], **fields})},
                              valid_request=False)
        assert answer.status_code == 422 and answer.json()["code"] == code, answer.text
        assert [e["path"] for e in answer.json()["errors"]] == [path]
    # Shaped right, but not the developer's own public URL: a plan error, so no apply.
    refused = config(app={**config()["app"], "entryUrl": f"{portal}/arcade"})
    plan = console.plan(refused)
    assert [(e["path"], e["code"]) for e in plan["errors"]] == [
        ("$.app.entryUrl", "entry_url_invalid")]
    assert console.call("POST", f"{P}/apply", f"{P}/apply", {
        "config": refused, "baseRevision": None}).json()["code"] == "config_plan_errors"
    wanted = config(app={**config()["app"], "entryUrl": "http://localhost:5173/play",
                         "distributionTargets": ["Web", "Telegram Mini App", "Base"]})
    assert console.apply(wanted).status_code == 201
    with world.sessions() as session:
        app = session.scalars(select(App).where(App.slug == "arcade")).one()
        assert app.entry_url == "http://localhost:5173/play"
        assert app.distribution_targets == ["Web", "Telegram Mini App", "Base"]
    assert ops_of(console.plan(wanted))[("app", "arcade")]["op"] == "unchanged"


def test_cli_grants_need_spec_scopes_for_their_own_app(world: World,
                                                      description: dict[str, Any]) -> None:
    """Each scope's part: tests/config/test_config_scopes.py."""
    reader = world.grant("game", ["apps:read"])
    writer = world.grant("game", ["apps:read", "apps:write", "products:write",
                                  "webhooks:write", "runtime:write"])
    game = config("game")
    with world.api(reader) as client:
        api = Api(client, description)
        assert api.plan(game)["ops"][0]["op"] == "update"
        refused = api.call("POST", f"{P}/apply", f"{P}/apply",
                           {"config": game, "baseRevision": None})
        assert refused.status_code == 403
        assert refused.json()["code"] == "developer_cli_scope_missing"
        other = api.call("POST", f"{P}/plan", f"{P}/plan", {"config": config("arcade")})
        assert other.status_code == 403
        assert other.json()["code"] == "developer_session_required"
    with world.api(writer) as client:
        api = Api(client, description)
        applied = api.apply(game)
        assert applied.status_code == 201, applied.text
        assert applied.json()["revision"]["via"] == "cli"
    with world.api() as client:
        anonymous = client.post(f"{P}/apply", json={})
        assert anonymous.status_code == 401  # before anything about the body
    _, other_org = add_developer(world.sessions, "dev2")
    add_owned_app(world.sessions, other_org, "theirs")
    with world.console() as client:  # dev1's session; "theirs" is another organization's
        answer = client.post(f"{P}/plan", json={"config": config("theirs")})
        assert answer.status_code == 404, answer.text


def test_a_pay_to_with_a_trailing_newline_is_refused(world: World, console: Api) -> None:
    """Python's ``$`` matches before a final newline: neither the schema's pattern (read as
    ECMA-262) nor the plan's address rule (tests/unit/test_pattern_ends.py) may take it."""
    document = config(app={**config()["app"], "payTo": PAY_TO + "\n"})
    answer = console.call("POST", f"{P}/plan", f"{P}/plan", {"config": document},
                          valid_request=False)
    errors = answer.json().get("errors") or []
    assert any(e["path"] == "$.app.payTo" for e in errors), answer.text
    applied = console.call("POST", f"{P}/apply", f"{P}/apply",
                           {"config": document, "baseRevision": None}, valid_request=False)
    assert applied.status_code in (409, 422), applied.text
    with world.sessions() as session:
        assert session.scalars(select(App).where(App.slug == "arcade")).first() is None


def test_schema_patterns_refuse_a_trailing_newline(world: World, console: Api) -> None:
    """The schema's ``$`` is ECMA-262's: the end of the text, not before a final newline."""
    document = config()
    document["products"][0]["priceAtomic"] = "10000\n"
    document["products"][1]["slug"] = "skin\n"
    document["products"][1]["riskPolicy"]["trustedServerCharge"]["maxAmountAtomic"] = "3\n"
    answer = console.call("POST", f"{P}/plan", f"{P}/plan", {"config": document},
                          valid_request=False)
    assert answer.status_code == 422 and answer.json()["code"] == "config_invalid", answer.text
    assert {e["path"] for e in answer.json()["errors"]} == {
        "$.products[0].priceAtomic", "$.products[1].slug",
        "$.products[1].riskPolicy.trustedServerCharge.maxAmountAtomic"}
    with world.sessions() as session:
        assert session.scalars(select(App).where(App.slug == "arcade")).first() is None


def test_the_entry_path_follows_the_app_path_unless_set_apart(world: World,
                                                            console: Api) -> None:
    def declared(app_path: str) -> dict[str, Any]:
        document = config()
        document["runtime"] = {**document["runtime"], "appPath": app_path}
        return document

    def paths() -> tuple[str | None, str | None]:
        with world.sessions() as session:
            app = session.scalars(select(App).where(App.slug == "arcade")).one()
            return app.runtime_app_path, app.runtime_entry_path

    assert console.apply(declared("/play")).status_code == 201
    assert paths() == ("/play", "/play")
    # Set apart (the console or `svc runtime configure --entry-path`): kept.
    with transaction(world.sessions) as session:
        session.execute(update(App).where(App.slug == "arcade").values(
            runtime_entry_path="/home"))
    assert console.apply(declared("/arena")).status_code == 201
    assert paths() == ("/arena", "/home")
