"""How a config file's products meet the app's (spec 2.3): by sku, the "match key for
product upsert", as ``svc product upsert`` matches them (``svc/product_plan.py``).

A file product is the app's product with the same sku, or with the sku its slug would be
when the file names none. A new slug on a known sku renames that product, which moves its
payment route; a new sku is a new product, so it cannot take a slug another product holds
(that would silently rewrite the other product's sku). The plan (``payments.config.plan``)
asks these questions; the words a developer reads are here.
"""

from __future__ import annotations

from typing import Any

from payments.models import Product, ProductStatus


def sku_of(wanted: dict[str, Any]) -> str:
    """The sku a file product declares, as the product rules store it (trimmed); its slug
    when it names none."""
    sku = wanted.get("sku", wanted["slug"])
    return sku.strip() if isinstance(sku, str) else str(sku)


def slug_taken(wanted: dict[str, Any], sku: str, holder: Product,
               current: Product | None) -> str:
    """Why a declared product cannot have the slug another product of the app holds."""
    slug = wanted["slug"]
    whose = (f"The slug '{slug}' belongs to the product with sku '{holder.sku}'"
             f"{' (disabled)' if holder.status is not ProductStatus.ACTIVE else ''}.")
    if current is not None:
        return (f"{whose} Products match by sku, so this renames the product with sku "
                f"'{sku}' (now '{current.slug}'), and two products cannot share a slug. "
                f"Free it first (`svc product update --product {slug} --slug <another>`), "
                "then apply this.")
    named = (f"sku '{sku}'" if "sku" in wanted
             else f"sku '{sku}' (the slug: the file names no sku)")
    return (f"{whose} Products match by sku, so {named} declares a new product, which needs a "
            f"slug of its own; to change that product, declare its sku '{holder.sku}'.")


def renamed(app_slug: str, product: Product, slug: str) -> dict[str, str]:
    """A new slug moves the product's payment route (spec 2.3): say what stops working."""
    return {"code": "product_slug_changed", "key": slug, "message": (
        f"Product '{product.slug}' (sku '{product.sku}') is renamed to '{slug}': its payment "
        f"route moves from /api/pay/{app_slug}/{product.slug} to /api/pay/{app_slug}/{slug}, "
        "and the old one answers 404 product_not_found, so update every client and backend "
        "that calls it. Payment codes and orders already issued for it are bound to the "
        "product, not its slug, and stay valid at the new route; webhook events from then on "
        "carry the new product.slug.")}
