"""Where an ``svc.config.v1`` document comes from (spec 2.9): a file, an existing app, a
starting template, or a legacy ``svc.toml`` with its products file.

Pure functions over plain data: the commands fetch and write, these decide. A document
made from an app says what the app is now, so planning it right after changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from svc.config_guard import secret_problems
from svc.errors import CliError, ExitCode, usage
from svc.product_plan import atomic_text
from svc.project import Project

SCHEMA_VERSION = "svc.config.v1"
DEFAULT_FILE = "svc.config.json"
TEMPLATE_SLUG = "my-app"
RUNTIME_MODE = "worker_quick_launch"
# Product fields svc.config.v1 declares, in the order a file shows them.
PRODUCT_FIELDS = ("slug", "sku", "name", "priceAtomic", "pricing", "minAmountAtomic",
                  "maxAmountAtomic", "riskMode", "riskPolicy", "fulfillmentAdapter",
                  "fulfillmentConfig")


def load_config(path: Path) -> dict[str, Any]:
    """The document in ``path``, refused (exit 2) when it is not a JSON object or holds a
    secret; everything else is the service's to judge, path by path."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise usage(f"There is no {path}. Write one with `svc config init`, or pass "
                    "--file.") from None
    except OSError as exc:
        raise usage(f"Cannot read {path}: {exc.strerror or exc}") from exc
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise usage(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise usage(f"{path}: expected a JSON object (an {SCHEMA_VERSION} document).")
    refuse_secrets(document, f"{path}", "Nothing was sent.")
    return document


def refuse_secrets(document: dict[str, Any], where: str, consequence: str) -> None:
    problems = secret_problems(document)
    if problems:
        raise CliError(f"{where} holds {len(problems)} secret value(s); remove them. "
                       f"{consequence}", ExitCode.USAGE, code="config_contains_secret",
                       errors=problems)


def from_app(app: dict[str, Any], products: list[dict[str, Any]],
             webhooks: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """The document that describes ``app`` as the developer API shows it, and notes on what
    it leaves out (disabled products and endpoints: declaring them would enable them)."""
    notes: list[str] = []
    document: dict[str, Any] = {"schemaVersion": SCHEMA_VERSION}
    if app.get("environment"):
        document["environment"] = app["environment"]
    document["app"] = _app_part(app)
    document["products"] = []
    for product in products:
        if product.get("status") == "active":
            document["products"].append(_product_part(product))
        else:
            notes.append(f"Product {product['slug']} is {product.get('status')}: left out "
                         "(declaring it would make it active again).")
    enabled = [hook for hook in webhooks if hook.get("status") == "enabled"]
    document["webhooks"] = [{"url": h["url"], "events": list(h["events"])} for h in enabled]
    if webhooks and not enabled:
        notes.append("The webhook endpoint is disabled: left out (declaring it would enable "
                     "it).")
    runtime = app.get("runtime") or {}
    if runtime.get("origin"):
        document["runtime"] = {"mode": RUNTIME_MODE, "origin": runtime["origin"],
                               "appPath": runtime.get("appPath") or "/"}
    return document, notes


def _app_part(app: dict[str, Any]) -> dict[str, Any]:
    part: dict[str, Any] = {"slug": app["slug"], "name": app["name"],
                            "kind": str(app["type"]).lower()}
    for key in ("entryUrl", "payTo"):
        if app.get(key):  # an empty entry URL or no pay_to is the same as not declaring it
            part[key] = app[key]
    part["distributionTargets"] = list(app.get("distributionTargets") or [])
    part["tags"] = list(app.get("tags") or [])
    return part


def _product_part(product: dict[str, Any]) -> dict[str, Any]:
    part = {k: product[k] for k in PRODUCT_FIELDS if product.get(k) is not None}
    if part.get("fulfillmentAdapter") != "webhook":  # the only adapter a config may name
        part.pop("fulfillmentAdapter", None)
    if not part.get("fulfillmentConfig"):
        part.pop("fulfillmentConfig", None)
    return part


def template(slug: str | None) -> dict[str, Any]:
    """A starting document for an app that does not exist yet: one product, no webhook
    (a webhook URL must be your real public HTTPS receiver; add it when you have one)."""
    slug = slug or TEMPLATE_SLUG
    return {
        "schemaVersion": SCHEMA_VERSION,
        "environment": "test",
        "app": {"slug": slug, "name": slug.replace("-", " ").title(), "kind": "game",
                "distributionTargets": ["Web"], "tags": []},
        "products": [{"slug": "retry", "sku": "retry", "name": "Retry", "priceAtomic": "10000",
                      "riskMode": "optimistic"}],
        "webhooks": [],
        "metadata": {},
    }


def from_project(project: Project, products: list[dict[str, Any]] | None
                 ) -> tuple[dict[str, Any], list[str]]:
    """The legacy ``svc configure`` inputs as a document: ``svc.toml``'s fields and the
    products of its products file (already read by ``svc.product_plan.load_products``)."""
    if not project.app:
        raise usage("svc.toml names no app: set app_slug (or pass --app).")
    app: dict[str, Any] = {"slug": project.app}
    if project.entry_url:
        app["entryUrl"] = project.entry_url
    if project.pay_to:
        app["payTo"] = project.pay_to
    document: dict[str, Any] = {"schemaVersion": SCHEMA_VERSION, "app": app}
    notes: list[str] = []
    if products is not None:
        document["products"] = []
        for index, product in enumerate(products, 1):
            if product.get("status") == "disabled":
                notes.append(f"Product {product['slug']} is disabled in the products file: "
                             "left out, so configure leaves it as it is on the service.")
                continue
            document["products"].append(_legacy_product(product, f"product {index}"))
    if project.webhook_url:
        document["webhooks"] = [{"url": project.webhook_url}]
    if project.runtime_origin:
        document["runtime"] = {"mode": RUNTIME_MODE, "origin": project.runtime_origin}
    return document, notes


def _legacy_product(product: dict[str, Any], where: str) -> dict[str, Any]:
    missing = [k for k in ("name", "priceAtomic") if product.get(k) is None]
    if missing:
        # A template-only product was created from its template's defaults; a config
        # declares every product in full.
        raise usage(f"Products file {where} ({product['slug']}) lacks {' and '.join(missing)}; "
                    "svc.config.v1 declares each product in full.")
    part = {k: product[k] for k in PRODUCT_FIELDS if product.get(k) is not None}
    trusted = (part.get("riskPolicy") or {}).get("trustedServerCharge")
    if isinstance(trusted, dict) and trusted.get("maxAmountAtomic") is not None:
        cap = atomic_text(trusted["maxAmountAtomic"], f"{where} 'maxAmountAtomic'")
        part["riskPolicy"] = {"trustedServerCharge": {**trusted, "maxAmountAtomic": cap}}
    return part
