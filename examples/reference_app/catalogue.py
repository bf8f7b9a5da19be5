"""What the page sells: the app's products by slug, with their service ids when known.

Product routes take the slug, but orders and trusted-server charges take the product id
(``zprod_``), which differs per deployment. The catalogue is a JSON file in the shape
``svc product list --json`` prints (``{"products": [{"id", "slug", "name",
"priceAtomic"}]}``); without ids the app still sells through the product route, and the
routes that need an id answer ``product_id_unknown``. Prices here are for display; the
service charges its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from svc.digits import parse_digits

_SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\Z")
_PRODUCT_ID = re.compile(r"^zprod_[A-Za-z0-9]{4,64}\Z")


class CatalogueError(ValueError):
    pass


@dataclass(frozen=True)
class Item:
    slug: str
    name: str
    price_atomic: int
    product_id: str | None = None

    def view(self) -> dict[str, Any]:
        return {"slug": self.slug, "name": self.name, "priceAtomic": str(self.price_atomic),
                "productId": self.product_id}


# The dev demo's products (router/dev.py seeds them from these templates).
DEFAULT_ITEMS = (
    Item("retry", "Retry / Continue", 10_000),
    Item("unlock-level", "Unlock Level", 30_000),
    Item("generate-once", "Generate Once", 50_000),
)


class Catalogue:
    def __init__(self, items: Iterable[Item] = DEFAULT_ITEMS) -> None:
        self.items = tuple(items)
        self._by_slug = {item.slug: item for item in self.items}
        self._by_id = {item.product_id: item for item in self.items if item.product_id}

    def by_slug(self, slug: object) -> Item | None:
        return self._by_slug.get(slug) if isinstance(slug, str) else None

    def by_id(self, product_id: str | None) -> Item | None:
        return self._by_id.get(product_id) if product_id else None

    def slug_of(self, product_id: str, fallback: str | None = None) -> str | None:
        item = self.by_id(product_id)
        return item.slug if item is not None else fallback

    @classmethod
    def from_json(cls, data: Any) -> Catalogue:
        products = data.get("products") if isinstance(data, dict) else None
        if not isinstance(products, list) or not products:
            raise CatalogueError("a catalogue is {\"products\": [...]} with at least one product")
        return cls(_item(p, n) for n, p in enumerate(products))

    @classmethod
    def from_file(cls, path: Path) -> Catalogue:
        try:
            return cls.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise CatalogueError(f"{path}: {exc}") from exc


def _item(product: Any, n: int) -> Item:
    if not isinstance(product, dict):
        raise CatalogueError(f"products[{n}] is not an object")
    slug, name, price = product.get("slug"), product.get("name"), product.get("priceAtomic")
    product_id = product.get("id")
    if not isinstance(slug, str) or not _SLUG.match(slug):
        raise CatalogueError(f"products[{n}].slug is not a product slug")
    if not isinstance(name, str) or not name.strip():
        raise CatalogueError(f"products[{n}].name is missing")
    # 19 digits: the service's largest amount, 2**63 - 1, has as many.
    price_atomic = parse_digits(str(price), 19) if isinstance(price, str | int) else None
    if price_atomic is None:
        raise CatalogueError(f"products[{n}].priceAtomic is not an integer string")
    if product_id is not None and (not isinstance(product_id, str)
                                   or not _PRODUCT_ID.match(product_id)):
        raise CatalogueError(f"products[{n}].id is not a zprod_ id")
    return Item(slug, name.strip(), price_atomic, product_id)
