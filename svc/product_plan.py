"""A products file against the service's products: what ``svc product diff`` prints and
``svc product upsert --file`` applies (spec 2.3, 2.9).

The file is JSON: a list of products, or an object with a ``products`` list (the shape of
``svc.config.json`` and of ``svc export --format products-json``). Products match by
``sku`` (which defaults to the slug), the key the spec names for upserts. Amounts are
integer strings of atomic units; a JSON number with a fraction is refused, not rounded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from svc.amounts import AmountError, parse_atomic
from svc.errors import usage

ATOMIC_FIELDS = ("priceAtomic", "minAmountAtomic", "maxAmountAtomic")
COMPARED = ("slug", "name", "priceAtomic", "riskMode", "pricing", "minAmountAtomic",
            "maxAmountAtomic", "riskPolicy", "fulfillmentAdapter", "fulfillmentConfig",
            "status")
# What the file format (and export) carries of a product; the rest is the service's.
FILE_FIELDS = ("slug", "sku", "name", "priceAtomic", "pricing", "minAmountAtomic",
               "maxAmountAtomic", "riskMode", "riskPolicy", "fulfillmentAdapter",
               "fulfillmentConfig", "status")


@dataclass(frozen=True)
class Change:
    kind: str  # "+" create, "~" update, "-" on the service only (never removed here)
    sku: str
    product: dict[str, Any]  # the file's product, or the service's for "-"
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # name: (now, wanted)

    def as_json(self) -> dict[str, Any]:
        return {"change": self.kind, "sku": self.sku, "slug": self.product.get("slug"),
                "fields": {k: {"from": a, "to": b} for k, (a, b) in self.fields.items()}}


def load_products(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise usage(f"Cannot read the products file {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise usage(f"{path} is not valid JSON: {exc}") from exc
    items = data.get("products") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise usage(f"{path}: expected a list of products or {{\"products\": [...]}}.")
    products = [normalized(item, f"{path} product {n}") for n, item in enumerate(items, 1)]
    skus = [p["sku"] for p in products]
    if len(set(skus)) != len(skus):
        raise usage(f"{path}: two products share a sku; skus identify products.")
    return products


def normalized(item: Any, where: str) -> dict[str, Any]:
    """A file product with its sku filled in and its amounts as integer strings."""
    if not isinstance(item, dict):
        raise usage(f"{where} is not an object.")
    unknown = sorted(set(item) - set(FILE_FIELDS) - {"template"})
    if unknown:
        raise usage(f"{where}: unknown field(s) {', '.join(unknown)}; products take "
                    f"{', '.join(FILE_FIELDS)}.")
    product = dict(item)
    slug, sku = product.get("slug"), product.get("sku") or product.get("slug")
    if not isinstance(slug, str) or not slug or not isinstance(sku, str):
        raise usage(f"{where} needs a 'slug' (and optionally a 'sku').")
    product["sku"] = sku
    for name in ATOMIC_FIELDS:
        if product.get(name) is not None:
            product[name] = atomic_text(product[name], f"{where} '{name}'")
    return product


def atomic_text(value: Any, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise usage(f"{where} must be an integer string of atomic units, e.g. \"50000\" for "
                    "0.05 USDC (`svc price 0.05`).")
    try:
        return str(parse_atomic(str(value)))
    except AmountError as exc:
        raise usage(f"{where}: {exc}") from exc


def plan(wanted: list[dict[str, Any]], current: list[dict[str, Any]]) -> list[Change]:
    by_sku = {p["sku"]: p for p in current}
    changes: list[Change] = []
    for product in wanted:
        have = by_sku.pop(product["sku"], None)
        if have is None:
            changes.append(Change("+", product["sku"], product))
            continue
        differing = {name: (have.get(name), value) for name, value in product.items()
                     if name in COMPARED and not _same(have.get(name), value)}
        if differing:
            changes.append(Change("~", product["sku"], {**product, "id": have["id"]},
                                  differing))
    changes += [Change("-", sku, p) for sku, p in by_sku.items() if p.get("status") != "disabled"]
    return changes


def _same(have: Any, want: Any) -> bool:
    """Equal as far as ``want`` says: objects compare only the keys the file names."""
    if isinstance(want, dict) and isinstance(have, dict):
        return all(_same(have.get(k), v) for k, v in want.items())
    if isinstance(want, int) and not isinstance(want, bool) and isinstance(have, str):
        return have == str(want)
    return bool(have == want)


def file_product(product: dict[str, Any]) -> dict[str, Any]:
    """A service product in the file format (for export)."""
    return {name: product[name] for name in FILE_FIELDS if name in product}


def change_lines(changes: list[Change]) -> list[str]:
    lines: list[str] = []
    for change in changes:
        p = change.product
        if change.kind == "+":
            lines.append(f"+ {change.sku}  {p.get('slug')}  {p.get('name', '')}  "
                         f"{p.get('priceAtomic', '(template)')}")
        elif change.kind == "-":
            lines.append(f"- {change.sku}  {p.get('slug')}  (on the service, not in the file; "
                         "left as is)")
        else:
            lines.append(f"~ {change.sku}  {p.get('slug')}")
            lines += [f"    {name}: {json.dumps(a)} -> {json.dumps(b)}"
                      for name, (a, b) in change.fields.items()]
    return lines
