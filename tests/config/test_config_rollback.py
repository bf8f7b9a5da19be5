"""Rollback restores the app as a revision left it (docs/config.md, "Rollback"), through
the real API on SQLite and PostgreSQL, every answer checked against the OpenAPI
description: fields the old file left out, products created since, changes made outside
config, a revision recorded before states were kept, and two rollbacks at once."""

from __future__ import annotations

import copy
import threading
from typing import Any

import httpx
from sqlalchemy import select, update

from payments.config.document import WITHHELD, schema_problems
from payments.config.models import ConfigRevision
from payments.models import App, Pricing, Product, ProductStatus, RiskMode, RuntimeStatus
from payments.webhooks.models import EndpointStatus, WebhookEndpoint
from tests.config.test_config_api import HOOK, Api, P, config, console, ops_of
from tests.developer.test_api import World

__all__ = ["console"]  # the fixture, used by name

TRUSTED = "riskPolicy.trustedServerCharge.enabled"


def second_config() -> dict[str, Any]:
    """Revision 2 of the walkthrough: ``retry`` (declared without a risk policy, mode or
    bounds in revision 1) turns trusted-server charges on, is settled first and priced per
    order; a product ``boost`` is added; the webhook also gets ``delivery.created``."""
    document = config()
    retry = document["products"][0]
    retry.update(riskMode="settled_first", pricing="dynamic_order", minAmountAtomic="5000",
                 maxAmountAtomic="50000",
                 riskPolicy={"trustedServerCharge": {"enabled": True}})
    document["products"].append({"slug": "boost", "name": "Boost", "priceAtomic": "30000"})
    document["webhooks"][0]["events"] = ["payment.delivered", "payment.settled",
                                         "delivery.created"]
    return document


def detail(api: Api, revision_id: str) -> dict[str, Any]:
    answer = api.call("GET", f"{P}/revisions/{revision_id}", f"{P}/revisions/{{revision}}")
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()["revision"]
    return found


def rollback_plan(api: Api, revision_id: str) -> dict[str, Any]:
    answer = api.call("POST", f"{P}/plan", f"{P}/plan", {"revision": revision_id})
    assert answer.status_code == 200, answer.text
    plan: dict[str, Any] = answer.json()
    return plan


def roll_back(api: Api, revision_id: str, plan: dict[str, Any]) -> httpx.Response:
    return api.call("POST", f"{P}/rollback", f"{P}/rollback", {
        "revision": revision_id, "baseRevision": plan["baseRevision"],
        "planDigest": plan["digest"]})


def changes(plan: dict[str, Any], resource: str, key: str) -> dict[str, tuple[Any, Any]]:
    return {c["field"]: (c["before"], c["after"])
            for c in ops_of(plan)[(resource, key)]["changes"]}


def product(world: World, slug: str) -> Product:
    with world.sessions() as session:
        found = session.scalar(select(Product).where(Product.slug == slug))
        assert found is not None
        return found


def test_rollback_restores_fields_the_old_file_left_out(world: World, console: Api) -> None:
    first = console.apply(config()).json()
    assert first["revision"]["number"] == 1
    secret = first["secrets"]["webhookSigningSecret"]
    second = console.apply(second_config())
    assert second.status_code == 201, second.text
    assert product(world, "retry").trusted_charge_enabled

    # Re-applying revision 1's file (what a rollback did) changes none of retry: the file
    # never named those fields.
    assert ops_of(console.plan(config()))[("product", "retry")]["op"] == "unchanged"

    plan = rollback_plan(console, first["revision"]["id"])
    assert (plan["mode"], plan["baseRevision"]) == ("mirror", second.json()["revision"]["id"])
    assert plan["errors"] == [] and plan["warnings"] == []
    assert changes(plan, "product", "retry") == {
        "pricing": ("dynamic_order", "fixed"), "minAmountAtomic": ("5000", None),
        "maxAmountAtomic": ("50000", None), "riskMode": ("settled_first", "optimistic"),
        TRUSTED: (True, False)}
    assert ops_of(plan)[("product", "boost")]["op"] == "disable"
    assert changes(plan, "webhook", HOOK) == {"events": (
        ["payment.delivered", "payment.settled", "delivery.created"],
        ["payment.delivered", "payment.settled"])}
    assert plan["summary"] == {"create": 0, "update": 2, "disable": 1, "unchanged": 3}

    rolled = roll_back(console, first["revision"]["id"], plan)
    assert rolled.status_code == 201, rolled.text
    result = rolled.json()
    assert result["revision"]["rollbackOf"] == first["revision"]["id"]
    assert result["revision"]["mode"] == "mirror" and "secrets" not in result
    retry, boost = product(world, "retry"), product(world, "boost")
    assert not retry.trusted_charge_enabled and retry.risk_mode is RiskMode.OPTIMISTIC
    assert (retry.pricing, retry.min_amount_atomic, retry.max_amount_atomic) == (
        Pricing.FIXED, None, None)
    assert boost.status is ProductStatus.DISABLED
    with world.sessions() as session:
        hook = session.scalars(select(WebhookEndpoint)).one()
        assert hook.events == ["payment.delivered", "payment.settled"]
        assert hook.status is EndpointStatus.ENABLED

    # The app is as revision 1 left it: the state the rollback recorded is revision 1's.
    one, three = detail(console, first["revision"]["id"]), detail(console,
                                                                  result["revision"]["id"])
    assert one["config"] == config()  # the document as sent is kept beside it
    assert one["state"] is not None and three["state"] == one["state"]
    assert schema_problems(one["state"]) == []
    assert secret not in str(one) + str(three)
    assert [p["slug"] for p in one["state"]["products"]] == ["retry", "skin"]
    assert one["state"]["products"][0]["riskPolicy"] == {"trustedServerCharge": {
        "enabled": False, "paymentProofRequired": True, "maxAmountAtomic": None}}

    again = rollback_plan(console, first["revision"]["id"])
    assert again["summary"]["update"] + again["summary"]["disable"] == 0
    same = roll_back(console, first["revision"]["id"], again)
    assert same.status_code == 200 and same.json()["revision"] is None


def test_rollback_to_the_head_undoes_changes_made_outside_config(world: World,
                                                                 console: Api) -> None:
    first = console.apply(config()).json()["revision"]
    app = ops_of(console.plan(config()))[("app", "arcade")]["id"]
    created = console.call("POST", f"/api/developer/apps/{app}/products",
                           "/api/developer/apps/{app}/products",
                           {"slug": "extra", "name": "Extra", "priceAtomic": "777"})
    assert created.status_code == 201, created.text
    with world.sessions() as session, session.begin():  # the console turned charges on
        session.execute(update(Product).where(Product.slug == "retry").values(
            trusted_charge_enabled=True, price_atomic=55_000))
    plan = rollback_plan(console, first["id"])
    assert plan["baseRevision"] == first["id"]  # nothing was applied since
    assert changes(plan, "product", "retry") == {"priceAtomic": ("55000", "10000"),
                                                 TRUSTED: (True, False)}
    assert ops_of(plan)[("product", "extra")]["op"] == "disable"
    assert roll_back(console, first["id"], plan).status_code == 201
    assert not product(world, "retry").trusted_charge_enabled
    assert product(world, "extra").status is ProductStatus.DISABLED


def test_a_revision_without_state_is_rolled_back_as_its_file_says_with_a_warning(
        world: World, console: Api) -> None:
    first = console.apply(config()).json()["revision"]
    with world.sessions() as session, session.begin():  # as recorded before migration 0012
        session.execute(update(ConfigRevision).where(ConfigRevision.id == first["id"])
                        .values(state=None))
    raised = second_config()
    raised["products"][0]["priceAtomic"] = "20000"
    assert console.apply(raised).status_code == 201
    assert detail(console, first["id"])["state"] is None

    plan = rollback_plan(console, first["id"])
    assert plan["mode"] == "merge"  # the revision's own
    assert [(w["code"], w["key"]) for w in plan["warnings"]] == [
        ("undeclared_product", "boost"), ("rollback_without_state", first["id"])]
    assert "keep their current values" in plan["warnings"][1]["message"]
    assert changes(plan, "product", "retry") == {"priceAtomic": ("20000", "10000")}
    rolled = roll_back(console, first["id"], plan)
    assert rolled.status_code == 201, rolled.text
    assert "rollback_without_state" in {w["code"] for w in rolled.json()["warnings"]}
    retry = product(world, "retry")
    assert retry.price_atomic == 10_000
    assert retry.trusted_charge_enabled  # as documented: the file never named it


def test_two_concurrent_rollbacks_on_one_revision_land_exactly_once(
        world: World, console: Api) -> None:
    first = console.apply(config()).json()["revision"]["id"]
    second = console.apply(second_config()).json()["revision"]["id"]
    base = console.apply(config(app={**config()["app"], "name": "Three"})).json()[
        "revision"]["id"]
    answers: list[httpx.Response] = []
    barrier = threading.Barrier(2)

    def roll(target: str) -> None:
        with world.console() as client:
            barrier.wait()
            answers.append(client.post(f"{P}/rollback", json={"revision": target,
                                                              "baseRevision": base}))

    threads = [threading.Thread(target=roll, args=(t,)) for t in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(a.status_code for a in answers) == [201, 409], [a.text for a in answers]
    winner = next(a for a in answers if a.status_code == 201).json()["revision"]
    assert next(a for a in answers if a.status_code == 409).json()["code"] == "config_conflict"
    with world.sessions() as session:
        numbers = session.scalars(select(ConfigRevision.number)).all()
        assert sorted(numbers) == [1, 2, 3, 4]
    # Everything of the winner landed, nothing of the loser: boost exists only in #2.
    boost = product(world, "boost")
    assert (boost.status is ProductStatus.ACTIVE) == (winner["rollbackOf"] == second)
    assert product(world, "retry").trusted_charge_enabled == (winner["rollbackOf"] == second)


def test_a_state_holding_what_looks_like_a_secret_is_not_recorded(world: World,
                                                                  console: Api) -> None:
    console.apply(config())
    # A row from before the product API refused secrets (it did not, until 2026-11-27).
    with world.sessions() as session, session.begin():
        session.execute(update(Product).where(Product.slug == "skin").values(
            fulfillment_config={"apiKey": "kept-out-of-revisions"}))
    edited = copy.deepcopy(config())
    edited["products"][0]["priceAtomic"] = "20000"
    edited["products"][1].pop("fulfillmentConfig")
    applied = console.apply(edited)
    assert applied.status_code == 201, applied.text
    warning = applied.json()["warnings"][-1]
    assert (warning["code"], warning["key"]) == (
        "state_not_recorded", "$.products[1].fulfillmentConfig.apiKey")
    revision = detail(console, applied.json()["revision"]["id"])
    assert revision["state"] is None
    assert "kept-out-of-revisions" not in str(revision) + str(applied.json())
    with world.sessions() as session:
        stored = session.get(ConfigRevision, revision["id"])
        assert stored is not None and stored.state is None


def test_a_rollback_plan_names_only_the_revision(world: World, console: Api) -> None:
    first = console.apply(config()).json()["revision"]["id"]
    for extra in ({"config": config()}, {"mode": "merge"}):
        refused = console.call("POST", f"{P}/plan", f"{P}/plan", {"revision": first, **extra},
                               valid_request=False)
        assert refused.status_code == 422, refused.text
        assert (refused.json()["code"], refused.json()["field"]) == (
            "invalid_field", next(iter(extra)))
    missing = console.call("POST", f"{P}/plan", f"{P}/plan", {"revision": "zcfgrev_" + "0" * 30})
    assert missing.status_code == 404 and missing.json()["code"] == "config_revision_not_found"
    # A plan of the old kind (the revision's file, as a CLI before this made it) is not the
    # rollback's: its digest is refused as stale, and nothing changes.
    console.apply(second_config())
    old_style = console.plan(config())
    stale = console.call("POST", f"{P}/rollback", f"{P}/rollback", {
        "revision": first, "baseRevision": old_style["baseRevision"],
        "planDigest": old_style["digest"]})
    assert stale.status_code == 409 and stale.json()["code"] == "config_plan_stale"
    assert "svc config rollback" in stale.json()["message"]
    assert product(world, "retry").trusted_charge_enabled


def test_what_no_config_can_take_away_is_named_in_the_plan(world: World,
                                                           console: Api) -> None:
    """Revision 1 left the app without a pay-to address or a runtime; both came later. No
    config can unbind an address, so the rollback plan says it stays; the runtime is
    disabled (the next test)."""
    bare = config("game", app={"slug": "game", "name": "Game"}, webhooks=[])
    del bare["runtime"]
    first = console.apply(bare).json()["revision"]["id"]
    assert console.apply(config("game")).status_code == 201
    plan = rollback_plan(console, first)
    assert [(w["code"], w["key"]) for w in plan["warnings"]] == [
        ("rollback_keeps_field", "app.payTo")]
    assert "cannot be unbound" in plan["warnings"][0]["message"]
    assert {(o["resource"], o["op"]) for o in plan["ops"]} >= {("webhook", "disable"),
                                                               ("runtime", "disable")}


def runtime_of(world: World, slug: str = "game") -> tuple[RuntimeStatus, str | None, str]:
    with world.sessions() as session:
        app = session.scalars(select(App).where(App.slug == slug)).one()
        return app.runtime_status, app.runtime_origin, app.runtime_app_path


def test_a_runtime_configured_since_is_disabled_not_removed(world: World,
                                                            console: Api) -> None:
    """The developer walk's case: revision 2 added a runtime, `svc config rollback 1` left
    it pending verification. A rollback restores the state, and the state of revision 1 has
    no runtime: it is disabled, as the webhook added since is, its origin and paths kept."""
    bare = config("game", webhooks=[])
    del bare["runtime"]
    first = console.apply(bare).json()["revision"]["id"]
    with_runtime = {**bare, "runtime": {"mode": "worker_quick_launch",
                                        "origin": "http://127.0.0.1:9", "appPath": "/play"}}
    assert console.apply(with_runtime).status_code == 201
    assert runtime_of(world)[0] is RuntimeStatus.PENDING_VERIFICATION
    plan = rollback_plan(console, first)
    assert ops_of(plan)[("runtime", "http://127.0.0.1:9")] == {
        "op": "disable", "resource": "runtime", "key": "http://127.0.0.1:9", "id": None,
        "changes": [{"field": "status", "before": "pending_verification",
                     "after": "disabled"}]}
    assert plan["summary"]["disable"] == 1 and plan["warnings"] == []
    assert plan["runtimeValidation"] is None  # no runtime left to verify
    rolled = roll_back(console, first, plan)
    assert rolled.status_code == 201, rolled.text
    assert rolled.json()["revision"]["rollbackOf"] == first
    assert runtime_of(world) == (RuntimeStatus.DISABLED, "http://127.0.0.1:9", "/play")
    # The state recorded by the rollback still lists the (disabled) runtime's origin, as
    # the state always has for a configured runtime, so rolling back to it again or
    # planning it changes nothing more.
    again = rollback_plan(console, first)
    assert again["summary"]["disable"] == 0 and again["summary"]["create"] == 0
    # A file that declares it again makes it wait for a verification, as any configure.
    assert console.apply(with_runtime).status_code in (200, 201)


def test_a_runtime_the_revision_had_is_left_running(world: World, console: Api) -> None:
    """Only a runtime the state lacks is disabled: a rollback to a revision that had the
    runtime plans no runtime op beyond restoring its origin and path."""
    first = console.apply(config("game")).json()["revision"]["id"]
    repriced = config("game")
    repriced["products"][0]["priceAtomic"] = "20000"
    assert console.apply(repriced).status_code == 201
    plan = rollback_plan(console, first)
    assert ops_of(plan)[("runtime", "http://127.0.0.1:9")]["op"] == "unchanged"
    assert roll_back(console, first, plan).status_code == 201
    assert runtime_of(world)[0] is RuntimeStatus.PENDING_VERIFICATION


def test_a_mirror_apply_leaves_an_undeclared_runtime_alone(world: World,
                                                            console: Api) -> None:
    """Spec 4.8's mirror disables products and webhooks absent from the file; a file
    without `runtime` says nothing about it, unlike a revision's state."""
    assert console.apply(config("game")).status_code == 201
    bare = config("game")
    del bare["runtime"]
    plan = console.plan(bare, "mirror")
    assert "runtime" not in {o["resource"] for o in plan["ops"]}
    assert console.apply(bare, "mirror").status_code in (200, 201)
    assert runtime_of(world)[0] is RuntimeStatus.PENDING_VERIFICATION


def test_a_value_set_outside_config_that_looks_like_a_secret_is_withheld_from_diffs(
        world: World, console: Api) -> None:
    """A change's before value comes from the rows, not the file: one that looks like a
    secret reads WITHHELD in the plan, the apply's answer and the revision's ops, while the
    plan's digest still names the value itself."""
    console.apply(config())

    def set_image(url: str) -> None:  # rows from before the product API refused secrets
        with world.sessions() as session, session.begin():
            session.execute(update(Product).where(Product.slug == "skin").values(
                fulfillment_config={"image": url}))
    set_image("https://cdn.example.com/skin.png?X-Amz-Signature=kept0out0of0ops")
    plan = console.plan(config())
    change = ops_of(plan)[("product", "skin")]["changes"]
    assert change == [{"field": "fulfillmentConfig", "before": {"image": WITHHELD},
                       "after": {"item": "skin"}}]

    set_image("https://cdn.example.com/skin.png?X-Amz-Signature=another0one")
    stale = console.call("POST", f"{P}/apply", f"{P}/apply", {
        "config": config(), "baseRevision": plan["baseRevision"], "planDigest": plan["digest"]})
    assert stale.status_code == 409 and stale.json()["code"] == "config_plan_stale"

    applied = console.apply(config())  # planned again: the file's {"item": "skin"} replaces it
    assert applied.status_code == 201, applied.text
    revision = detail(console, applied.json()["revision"]["id"])
    assert WITHHELD in str(revision["ops"]) and revision["state"] is not None
    seen = str(plan) + stale.text + applied.text + str(revision)
    assert "kept0out0of0ops" not in seen and "another0one" not in seen
    with world.sessions() as session:
        stored = session.get(ConfigRevision, revision["id"])
        assert stored is not None and "another0one" not in str(stored.ops)
