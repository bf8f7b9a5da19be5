"""Several product changes of ``svc product upsert`` as one config apply: all or nothing.

The product API changes one product a request, so an upsert of several changes that the
service refuses midway would leave the ones before the refusal made. The config apply
(spec 4.8) makes a whole plan in one transaction; in ``merge`` mode, with a document that
declares only the changed products and names only the app's slug, it does what the
upsert's requests would: products match by sku there too (payments/config/plan.py), fields
left out are left alone, and the products, webhook and runtime it does not declare are
left as they are.

A config declares a product active, in full, with amounts above zero, and knows no
templates, so :func:`as_config` says ``None`` for a change it cannot carry: a product made
from a ``template``, a ``status`` of ``disabled`` (or a change to a disabled product, which
declaring it would enable), an amount of ``0``. Those upserts go one request at a time as
before (svc/commands/products.py), and say what was applied when one is refused.
"""

from __future__ import annotations

import re
from typing import Any

from svc.client import ApiFailure, DeveloperClient, ServiceUnreachable
from svc.commands.config_flow import CONFIG, CONFLICTS, apply_body, request_plan
from svc.errors import CliError, ExitCode
from svc.product_plan import Change

SCHEMA_VERSION = "svc.config.v1"
AMOUNTS = ("priceAtomic", "minAmountAtomic", "maxAmountAtomic")
# Warnings about what the document leaves out on purpose: it declares the changed products.
UNDECLARED = ("undeclared_product", "undeclared_webhook")
_PRODUCT_PATH = re.compile(r"^\$\.products\[([0-9]+)\]")


def as_config(slug: str, changes: list[Change],
              current: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The ``svc.config.v1`` document that makes ``changes`` (``+`` and ``~``), or ``None``
    when one of them is not a config's to make."""
    by_sku = {p["sku"]: p for p in current}
    products = []
    for change in changes:
        product = _declared(change, by_sku.get(change.sku))
        if product is None:
            return None
        products.append(product)
    return {"schemaVersion": SCHEMA_VERSION, "app": {"slug": slug}, "products": products}


def _declared(change: Change, have: dict[str, Any] | None) -> dict[str, Any] | None:
    wanted = change.product
    if "template" in wanted or wanted.get("status", "active") != "active":
        return None
    if change.kind == "+":
        product = {k: v for k, v in wanted.items() if k != "status"}
    else:  # the name and price a config requires are the product's own unless changed
        if have is None or have.get("status") != "active":
            return None
        product = {"slug": wanted["slug"], "sku": change.sku, "name": have["name"],
                   "priceAtomic": have["priceAtomic"],
                   **{name: after for name, (_, after) in change.fields.items()
                      if name != "status"}}
    if product.get("name") is None or product.get("priceAtomic") is None:
        return None  # the product API says what is missing
    return product if _amounts_above_zero(product) else None


def _amounts_above_zero(product: dict[str, Any]) -> bool:
    """svc.config.v1 writes no amount of 0 (the product API has its own words for one)."""
    trusted = ((product.get("riskPolicy") or {}).get("trustedServerCharge") or {})
    amounts = [product.get(name) for name in AMOUNTS] + [trusted.get("maxAmountAtomic")]
    return all(value is None or str(value) != "0" for value in amounts)


def apply_at_once(client: DeveloperClient, document: dict[str, Any],
                  changes: list[Change]) -> dict[str, Any]:
    """Plan and apply ``document``; the apply's answer. A plan with errors, a conflict
    with another change and a lost answer raise :class:`CliError` saying nothing, or
    possibly everything, was applied; never a part."""
    try:
        planned = request_plan(client, document, "merge")
    except ApiFailure as failure:  # the schema or the secret guard: paths into the document
        if not failure.errors:
            raise
        raise _refused(failure.errors, changes, (failure.code, failure.message)) from None
    if planned["errors"]:
        raise _refused(planned["errors"], changes)
    try:
        answer = client.call("POST", f"{CONFIG}/apply", apply_body(document, planned))
    except ApiFailure as failure:
        if failure.code not in CONFLICTS:
            raise
        raise CliError(f"{failure.message} Nothing was changed: run the command again to "
                       "upsert against the products as they are now.", ExitCode.FAILED,
                       code=failure.code) from None
    except ServiceUnreachable as exc:
        raise CliError(f"{exc}. The changes were sent as one config apply, so all of them "
                       "were made or none was: `svc product diff` shows which.",
                       ExitCode.NETWORK, code="unreachable",
                       command="svc product diff") from None
    return answer


def kept_warnings(warnings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The apply's warnings about the changes (a rename's moved payment route), not about
    the products and webhook the document leaves out on purpose."""
    return [w for w in warnings if w.get("code") not in UNDECLARED]


def _refused(errors: list[dict[str, Any]], changes: list[Change],
             answer: tuple[str, str] | None = None) -> CliError:
    """The plan's blocking errors (or the document's: ``answer``'s code and message),
    each path naming the product by its sku rather than its place in a document nobody
    wrote. A slug another product holds is a refusal (exit 1), as the product API's 409;
    the rest is input the service rejects (exit 2)."""
    named = [{"path": _product_path(str(e.get("path", "")), changes),
              "code": str(e.get("code", "")), "message": str(e.get("message", ""))}
             for e in errors]
    first = named[0]
    code, said = answer or (first["code"], f"The service refused {first['path']}: "
                                           f"{first['message']}")
    exit_code = ExitCode.FAILED if code == "product_exists" else ExitCode.USAGE
    return CliError(f"{said} Nothing was changed: the changes go together or not at all.",
                    exit_code, code=code, errors=named)


def _product_path(path: str, changes: list[Change]) -> str:
    found = _PRODUCT_PATH.match(path)
    if found is None or int(found.group(1)) >= len(changes):
        return path
    change = changes[int(found.group(1))]
    rest = path[found.end():].lstrip(".")
    return f"product {change.sku}" + (f" ({rest})" if rest else "")
