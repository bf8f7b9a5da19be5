"""The products file and its plan against the service's products (offline)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from svc.errors import CliError, ExitCode
from svc.product_plan import load_products, plan

SERVICE: list[dict[str, Any]] = [
    {"id": "zprod_1", "slug": "retry", "sku": "retry", "name": "Retry", "priceAtomic": "10000",
     "riskMode": "optimistic", "status": "active", "fulfillmentConfig": {"sku": "r", "n": 1},
     "riskPolicy": {"trustedServerCharge": {"enabled": False, "paymentProofRequired": False,
                                            "maxAmountAtomic": None}}},
    {"id": "zprod_2", "slug": "old", "sku": "old", "name": "Old", "priceAtomic": "5",
     "status": "disabled"},
]


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "products.json"
    path.write_text(json.dumps(data))
    return path


def test_a_list_or_an_object_with_products(tmp_path: Path) -> None:
    item = {"slug": "retry", "priceAtomic": 10000}
    assert load_products(write(tmp_path, [item])) == \
        load_products(write(tmp_path, {"schemaVersion": "svc.config.v1", "products": [item]})) \
        == [{"slug": "retry", "sku": "retry", "priceAtomic": "10000"}]


def test_nested_objects_compare_only_the_keys_the_file_names() -> None:
    same = [{"slug": "retry", "sku": "retry", "fulfillmentConfig": {"sku": "r"},
             "riskPolicy": {"trustedServerCharge": {"enabled": False}}}]
    assert plan(same, SERVICE) == []  # the disabled product is not reported as extra
    changed = plan([{"slug": "retry", "sku": "retry",
                     "riskPolicy": {"trustedServerCharge": {"enabled": True}}}], SERVICE)
    assert [(c.kind, list(c.fields)) for c in changed] == [("~", ["riskPolicy"])]
    assert changed[0].product["id"] == "zprod_1"


def test_matching_is_by_sku_so_a_slug_can_change() -> None:
    changes = plan([{"slug": "retry-2", "sku": "retry", "name": "Retry"}], SERVICE)
    assert [(c.kind, c.sku, c.fields) for c in changes] == [
        ("~", "retry", {"slug": ("retry", "retry-2")})]


@pytest.mark.parametrize(("data", "words"), [
    ({"items": []}, "expected a list"), ([1], "is not an object"),
    ([{"name": "x"}], "needs a 'slug'"), ([{"slug": "a", "priceAtomic": 1.5}], "integer string"),
    ([{"slug": "a", "priceAtomic": True}], "integer string"),
    ([{"slug": "a", "priceAtomic": "-1"}], "negative"),
    ([{"slug": "a", "maxAmountAtomic": "1e3"}], "whole number"),
    ([{"slug": "a"}, {"slug": "b", "sku": "a"}], "share a sku"),
    ([{"slug": "a", "price": "0.05"}], "unknown field(s) price"),
])
def test_bad_files_are_usage_errors(tmp_path: Path, data: object, words: str) -> None:
    with pytest.raises(CliError) as caught:
        load_products(write(tmp_path, data))
    assert caught.value.exit_code == ExitCode.USAGE and words in caught.value.message


def test_unreadable_or_broken_files(tmp_path: Path) -> None:
    with pytest.raises(CliError, match="Cannot read the products file"):
        load_products(tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(CliError, match="not valid JSON"):
        load_products(tmp_path / "broken.json")
