"""Config plan, apply and rollback match products by sku, the match key of spec 2.3 (as
``svc product upsert`` does), through the real API on SQLite and PostgreSQL: a new slug on
a known sku renames that product (and warns that its payment route moves), a new sku is a
new product even on a slug in use (refused: the slug is taken), mirror mode disables by
sku, and a rollback across a rename renames the product back."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from payments.config.models import ConfigRevision
from payments.models import Product, ProductStatus
from tests.config.test_config_api import Api, config, console, ops_of
from tests.config.test_config_rollback import roll_back, rollback_plan
from tests.developer.test_api import World

__all__ = ["console"]  # the fixture, used by name


def with_skin(**fields: Any) -> dict[str, Any]:
    """``config()`` with the product ``skin`` (sku ``skin-1``) changed as ``fields`` say."""
    document = config()
    document["products"][1].update(fields)
    return document


def products(world: World) -> dict[str, tuple[str, str, ProductStatus]]:
    """sku: (id, slug, status) of every product."""
    with world.sessions() as session:
        return {p.sku: (p.id, p.slug, p.status) for p in session.scalars(select(Product))}


def codes(plan: dict[str, Any]) -> set[tuple[str, str]]:
    return {(w["code"], w["key"]) for w in plan["warnings"]}


def test_a_new_slug_on_a_known_sku_renames_that_product(world: World, console: Api) -> None:
    assert console.apply(config()).status_code == 201
    before = products(world)
    renamed = with_skin(slug="skin-gold")
    plan = console.plan(renamed)
    assert plan["errors"] == []
    op = ops_of(plan)[("product", "skin-gold")]
    assert (op["op"], op["id"]) == ("update", before["skin-1"][0])
    assert op["changes"] == [{"field": "slug", "before": "skin", "after": "skin-gold"}]
    assert plan["summary"] == {"create": 0, "update": 1, "disable": 0, "unchanged": 4}
    # The old payment route stops answering: the plan says so.
    warning = next(w for w in plan["warnings"] if w["code"] == "product_slug_changed")
    assert warning["key"] == "skin-gold"
    assert "/api/pay/arcade/skin " in warning["message"]
    assert "/api/pay/arcade/skin-gold" in warning["message"]

    applied = console.apply(renamed)
    assert applied.status_code == 201, applied.text
    assert applied.json()["ids"]["products"]["skin-gold"] == before["skin-1"][0]
    after = products(world)
    assert after["skin-1"] == (before["skin-1"][0], "skin-gold", ProductStatus.ACTIVE)
    assert after["retry"] == before["retry"] and len(after) == 2
    # Applied again: nothing to do, no warning.
    again = console.plan(renamed)
    assert again["summary"]["update"] == 0 and codes(again) == set()


def test_a_new_sku_on_a_slug_in_use_is_a_conflict_not_a_sku_rewrite(
        world: World, console: Api) -> None:
    assert console.apply(config()).status_code == 201
    before = products(world)
    plan = console.plan(with_skin(sku="skin-2"))
    assert [(e["path"], e["code"]) for e in plan["errors"]] == [
        ("$.products[1].slug", "product_exists")]
    message = plan["errors"][0]["message"]
    assert "sku 'skin-1'" in message and "sku 'skin-2' declares a new product" in message
    assert ("product", "skin") not in ops_of(plan)
    # Leaving the sku out means the slug: a new product too, and the message says why.
    no_sku = with_skin()
    del no_sku["products"][1]["sku"]
    plan = console.plan(no_sku)
    assert [(e["path"], e["code"]) for e in plan["errors"]] == [
        ("$.products[1].slug", "product_exists")]
    assert "the file names no sku" in plan["errors"][0]["message"]
    assert "declare its sku 'skin-1'" in plan["errors"][0]["message"]
    refused = console.apply(with_skin(sku="skin-2"), planned=False)
    assert refused.status_code == 422 and refused.json()["code"] == "config_plan_errors"
    assert products(world) == before


def test_a_rename_onto_a_slug_another_product_holds_is_refused(
        world: World, console: Api) -> None:
    assert console.apply(config()).status_code == 201
    # Mirror disables retry; it still holds its slug, so skin cannot take it either.
    for mode in ("merge", "mirror"):
        document = config()
        document["products"] = [{**document["products"][1], "slug": "retry"}]
        plan = console.plan(document, mode)
        assert [(e["path"], e["code"]) for e in plan["errors"]] == [
            ("$.products[0].slug", "product_exists")], mode
        message = plan["errors"][0]["message"]
        assert "belongs to the product with sku 'retry'" in message
        assert "renames the product with sku 'skin-1' (now 'skin')" in message
    before = products(world)
    assert console.apply(document, "mirror", planned=False).status_code == 422
    assert products(world) == before


def test_mirror_disables_by_sku_and_keeps_a_renamed_product(world: World,
                                                            console: Api) -> None:
    assert console.apply(config()).status_code == 201
    only_skin = with_skin(slug="skin-gold")
    only_skin["products"] = only_skin["products"][1:]
    merge = console.plan(only_skin, "merge")
    assert codes(merge) == {("product_slug_changed", "skin-gold"),
                            ("undeclared_product", "retry")}
    mirror = console.plan(only_skin, "mirror")
    assert {(o["op"], o["key"]) for o in mirror["ops"] if o["resource"] == "product"} == {
        ("update", "skin-gold"), ("disable", "retry")}
    assert console.apply(only_skin, "mirror").status_code == 201
    after = products(world)
    assert after["skin-1"][1:] == ("skin-gold", ProductStatus.ACTIVE)
    assert after["retry"][1:] == ("retry", ProductStatus.DISABLED)


def test_rollback_across_a_rename_renames_the_product_back(world: World,
                                                           console: Api) -> None:
    first = console.apply(config()).json()["revision"]
    skin_id = products(world)["skin-1"][0]
    assert console.apply(with_skin(slug="skin-gold")).status_code == 201
    plan = rollback_plan(console, first["id"])
    assert plan["errors"] == []
    op = ops_of(plan)[("product", "skin")]
    assert (op["op"], op["id"]) == ("update", skin_id)
    assert op["changes"] == [{"field": "slug", "before": "skin-gold", "after": "skin"}]
    assert ("product_slug_changed", "skin") in codes(plan)
    assert roll_back(console, first["id"], plan).status_code == 201
    assert products(world)["skin-1"] == (skin_id, "skin", ProductStatus.ACTIVE)


def test_rollback_undoes_a_rename_made_outside_config(world: World, console: Api) -> None:
    """Revision 1's state names the product by sku and slug; a slug changed since through
    the product API goes back (it was refused as ``product_exists`` when config matched
    products by slug)."""
    first = console.apply(config()).json()["revision"]
    with world.sessions() as session:
        revision = session.get(ConfigRevision, first["id"])
        assert revision is not None and revision.state is not None
        recorded = revision.state["products"][1]
    assert (recorded["slug"], recorded["sku"]) == ("skin", "skin-1")
    renamed = console.call("PATCH", "/api/developer/apps/arcade/products/skin",
                           "/api/developer/apps/{app}/products/{product}",
                           {"slug": "skin-v2"})
    assert renamed.status_code == 200, renamed.text
    plan = rollback_plan(console, first["id"])
    assert plan["errors"] == []
    assert ops_of(plan)[("product", "skin")]["changes"] == [
        {"field": "slug", "before": "skin-v2", "after": "skin"}]
    assert roll_back(console, first["id"], plan).status_code == 201
    assert products(world)["skin-1"][1] == "skin"


def test_two_declarations_of_one_stored_sku_are_refused(world: World, console: Api) -> None:
    """``"gem"`` and ``"gem "`` pass the file's uniqueness rule, but the product rules store
    both as ``gem``: the plan refuses the second rather than plan it twice."""
    document = config()
    document["products"] = [{"slug": "gem", "sku": "gem", "name": "Gem", "priceAtomic": "1"},
                            {"slug": "gem-2", "sku": "gem ", "name": "Gem", "priceAtomic": "1"}]
    plan = console.plan(document)
    assert [(e["path"], e["code"]) for e in plan["errors"]] == [
        ("$.products[1].sku", "config_duplicate")]
