"""The app as an apply left it, as an ``svc.config.v1`` document: what a rollback restores.

A revision's ``config`` is the document as sent, and fields it leaves out are left alone, so
re-applying it cannot undo a change to one of them. The state names every field config
manages, read back from the rows the apply just wrote (in its transaction): the app's
fields, each active product in full (``null`` for a bound it has none of), the enabled
webhook endpoint's URL and events, the runtime origin and app path. A product that is not
active and an endpoint that is not enabled are left out, which is what mirror mode, the
mode a rollback plans the state in, turns into "disabled". Nothing secret is part of it:
signing secrets and keys are no config fields, and a state in which a value set outside
config looks like one (a webhook URL with ``?token=`` saved through the webhook API, a
product written before the product API refused secrets) is not recorded.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from payments.config.document import Problem, schema_problems, secret_problems
from payments.models import App, Product, ProductStatus, RuntimeStatus
from payments.products import product_view
from payments.webhooks.models import EndpointStatus, WebhookEndpoint

SCHEMA_VERSION = "svc.config.v1"
# The product fields a state names, in the file's order (wire names).
PRODUCT_FIELDS = ("slug", "sku", "name", "priceAtomic", "pricing", "minAmountAtomic",
                  "maxAmountAtomic", "riskMode", "riskPolicy", "fulfillmentAdapter",
                  "fulfillmentConfig")


def app_state(session: Session, app: App, environment: str | None = None) -> dict[str, Any]:
    """Every field config manages, as the rows in ``session`` have them now."""
    state: dict[str, Any] = {"schemaVersion": SCHEMA_VERSION}
    if environment is not None:
        state["environment"] = environment
    part: dict[str, Any] = {"slug": app.slug, "name": app.name,
                            "kind": app.type.value.lower(), "entryUrl": app.entry_url or ""}
    if app.pay_to is not None:  # no file can unbind one, so none is no field to restore
        part["payTo"] = app.pay_to
    part["distributionTargets"] = list(app.distribution_targets)
    part["tags"] = list(app.tags)
    state["app"] = part
    products = session.scalars(select(Product).where(
        Product.app_id == app.id, Product.status == ProductStatus.ACTIVE)
        .order_by(Product.created_at, Product.slug))
    state["products"] = [_product_part(p) for p in products]
    endpoint = session.scalar(select(WebhookEndpoint).where(
        WebhookEndpoint.app_id == app.id, WebhookEndpoint.status == EndpointStatus.ENABLED))
    state["webhooks"] = ([{"url": endpoint.url, "events": list(endpoint.events)}]
                         if endpoint is not None else [])
    if app.runtime_status is not RuntimeStatus.NOT_CONFIGURED and app.runtime_origin:
        state["runtime"] = {"mode": "worker_quick_launch", "origin": app.runtime_origin,
                            "appPath": app.runtime_app_path}
    return state


def _product_part(product: Product) -> dict[str, Any]:
    view = product_view(product, "", "")
    part = {name: view[name] for name in PRODUCT_FIELDS}
    if part["fulfillmentAdapter"] != "webhook":  # the only adapter a file may name
        del part["fulfillmentAdapter"]
    return part


def recordable_state(session: Session, app: App, document: dict[str, Any]
                     ) -> tuple[dict[str, Any] | None, Problem | None]:
    """The state to record with a revision, or None and why not: a revision holds no secret
    (spec 2.9), and a state today's schema refuses could not be rolled back to anyway."""
    state = app_state(session, app, document.get("environment"))
    problems = secret_problems(state) or schema_problems(state)
    return (None, problems[0]) if problems else (state, None)
