"""``svc product upsert`` of several changes against a real router (SQLite and PostgreSQL):
one config apply, so a refusal of one change leaves the others unmade too; and, for the
changes a config cannot carry, one request at a time with a refusal midway saying which
were made and which were not."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import func, select

from payments.config.models import ConfigRevision
from payments.models import Product
from tests.svc.test_cli_end_to_end import World
from tests.svc.test_cli_groups import ok, refused, run, signed_in


def products(world: World) -> dict[str, tuple[str, int, str]]:
    """sku: (slug, price, status), as the ledger holds them."""
    with world.sessions() as session:
        return {sku: (slug, price, status.value) for sku, slug, price, status in
                session.execute(select(Product.sku, Product.slug, Product.price_atomic,
                                       Product.status))}


def revisions(world: World) -> int:
    with world.sessions() as session:
        return session.scalar(select(func.count()).select_from(ConfigRevision)) or 0


def write(world: World, items: list[dict[str, Any]]) -> None:
    (world.home / "products.json").write_text(json.dumps(items))


def with_two_products(world: World) -> dict[str, tuple[str, int, str]]:
    signed_in(world, "apps:read,products:write")
    ok(world, "product", "create", "--product", "retry", "--name", "Retry", "--price", "0.01")
    ok(world, "product", "create", "--product", "boost", "--name", "Boost", "--price", "0.02")
    return products(world)


def test_several_changes_land_together_or_not_at_all(world: World) -> None:
    before = with_two_products(world)
    # The first change is fine, the second takes a slug another product holds (a new sku),
    # the third is fine: one at a time, the first would have been made before the refusal.
    write(world, [{"slug": "retry", "name": "Retry", "priceAtomic": "30000"},
                  {"slug": "boost", "sku": "other", "name": "Other", "priceAtomic": "5000"},
                  {"slug": "gem", "name": "Gem", "priceAtomic": "7000"}])
    error = refused(world, "product", "upsert", "--file", "products.json", exit_code=1)
    assert products(world) == before and revisions(world) == 0  # not even retry's price
    assert error["code"] == "product_exists"
    assert error["message"].startswith("The service refused product other (slug): ")
    assert error["message"].endswith("Nothing was changed: the changes go together or not "
                                     "at all.")
    assert [(e["path"], e["code"]) for e in error["errors"]] == [
        ("product other (slug)", "product_exists")]

    text = run(world, "product", "upsert", "--file", "products.json")
    assert text.returncode == 1 and "  product other (slug): " in text.stderr

    # Without the refused one: both changes, as one config apply (the revision says so).
    write(world, [{"slug": "retry", "name": "Retry", "priceAtomic": "30000"},
                  {"slug": "gem", "name": "Gem", "priceAtomic": "7000"}])
    applied = ok(world, "product", "upsert", "--file", "products.json")
    assert [(c["change"], c["sku"]) for c in applied["applied"]] == [("~", "retry"),
                                                                       ("+", "gem")]
    assert [c["sku"] for c in applied["untouched"]] == ["boost"]
    assert applied["warnings"] == []  # not the apply's undeclared_product for boost
    assert applied["revision"]["number"] == 1 and revisions(world) == 1
    assert products(world) == {**before, "retry": ("retry", 30000, "active"),
                               "gem": ("gem", 7000, "active")}
    # One change is one request, as before: nothing to keep together, no revision.
    one = ok(world, "product", "upsert", "--product", "gem", "--price", "0.008")
    assert one["revision"] is None and revisions(world) == 1
    text = run(world, "product", "upsert", "--file", "products.json")
    assert text.returncode == 0
    assert text.stdout.splitlines() == [
        "~ gem  gem", '    priceAtomic: "8000" -> "7000"',
        "- boost  boost  (on the service, not in the file; left as is)",
        "1 change(s) applied."]


def test_a_rename_among_several_changes_warns_as_the_product_api_does(world: World) -> None:
    with_two_products(world)
    write(world, [{"slug": "retry-level", "sku": "retry", "name": "Retry", "priceAtomic": "10000"},
                  {"slug": "boost", "name": "Boost", "priceAtomic": "25000"}])
    text = run(world, "product", "upsert", "--file", "products.json")
    assert text.returncode == 0, text.stderr
    assert "2 change(s) applied together, as config revision 1 (zcfgrev_" in text.stdout
    assert "Warnings:\n  retry-level: Product 'retry' (sku 'retry') is renamed to " \
        "'retry-level'" in text.stdout
    assert "undeclared" not in text.stdout
    assert products(world) == {"retry": ("retry-level", 10000, "active"),
                               "boost": ("boost", 25000, "active")}


def test_changes_a_config_cannot_carry_go_one_by_one_and_say_where_they_stopped(
        world: World) -> None:
    before = with_two_products(world)
    # Disabling is not a config's (it declares products active): one request at a time.
    # The second is refused by a rule only the service checks (dynamic_order bounds).
    write(world, [{"slug": "retry", "status": "disabled"},
                  {"slug": "tip", "name": "Tip", "priceAtomic": "1000",
                   "pricing": "dynamic_order"},
                  {"slug": "gem", "name": "Gem", "priceAtomic": "7000"}])
    done = run(world, "product", "upsert", "--file", "products.json", "--json")
    assert done.returncode == 2, done.stderr
    answer = json.loads(done.stdout)
    assert [c["sku"] for c in answer["applied"]] == ["retry"]
    assert [c["sku"] for c in answer["notApplied"]] == ["tip", "gem"]
    assert answer["unknown"] == [] and answer["revision"] is None
    assert answer["error"]["code"] == "invalid_pricing"
    assert products(world) == {**before, "retry": ("retry", 10000, "disabled")}

    ok(world, "product", "update", "--product", "retry", "--status", "active")
    text = run(world, "product", "upsert", "--file", "products.json")
    assert text.returncode == 2
    assert text.stdout.splitlines()[-4:] == [
        "Stopped at change 2 of 3, which was refused:",
        "  applied:     ~ retry (retry)",
        "  refused:     + tip (tip)",
        "  not applied: + gem (gem)"]
    assert text.stderr.startswith("svc: dynamic_order products need")

    # What the CLI can see would be refused is refused before anything is sent.
    ok(world, "product", "update", "--product", "retry", "--status", "active")
    write(world, [{"slug": "retry", "status": "disabled"},
                  {"slug": "boost", "sku": "other", "name": "Other", "priceAtomic": "5000"}])
    taken = refused(world, "product", "upsert", "--file", "products.json", exit_code=1)
    assert taken["code"] == "product_exists" and taken["message"].endswith("Nothing was sent.")
    write(world, [{"slug": "retry", "status": "disabled"}, {"slug": "gem", "name": "Gem"}])
    missing = refused(world, "product", "upsert", "--file", "products.json", exit_code=2)
    assert missing["code"] == "missing_field"
    assert products(world) == before and revisions(world) == 0
