"""What applying a config would change: ops per resource, blocking errors, warnings.

The plan is computed from the database and the document alone and writes nothing; apply
computes it again inside its transaction and carries out exactly those ops, so what a
plan shows and what an apply does come from one function. Values are compared in their
wire form (``product_view``), after the same field rules the product API applies, so a
plan cannot promise a change the API would refuse.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import select
from sqlalchemy.orm import Session

from manifest.rules import (
    MANIFEST_PATH,
    MAX_PATH_LENGTH,
    PAYMENT_SUBMITTED_PATH,
    WEBHOOK_PATH,
    is_concrete_path,
    same_origin,
)
from manifest.url_policy import UrlPolicy, UrlRefused, check_runtime_origin, check_webhook_url
from payments.apps import check_distribution_targets, check_entry_url_field, check_pay_to
from payments.config.document import Problem, json_path, withhold_secrets
from payments.config.models import ConfigRevision
from payments.config.product_match import renamed, sku_of, slug_taken
from payments.developer.models import ApiKey
from payments.errors import ApiError
from payments.models import App, AppType, Product, ProductStatus, RuntimeStatus
from payments.products import ProductDraft, apply_product_fields, product_view
from payments.slugs import check_slug
from payments.webhooks.endpoints import DEFAULT_EVENTS
from payments.webhooks.models import EndpointStatus, WebhookEndpoint

# Runtime statuses a rollback to a state without a runtime disables (spec 3.1's disable).
RUNNING = (RuntimeStatus.PENDING_VERIFICATION, RuntimeStatus.ACTIVE)
KINDS = {"game": AppType.GAME, "application": AppType.APPLICATION}
# The CLI grant scope (spec 5.3) each kind of change needs: the one the resource's own API
# asks for, so a config apply can do nothing a grant could not do call by call.
WRITE_SCOPES = {"app": "apps:write", "runtime": "runtime:write", "product": "products:write",
                "webhook": "webhooks:write"}
# Product fields compared, in the order a diff shows them. The sku never changes (products
# match by it); a new slug renames the product.
PRODUCT_FIELDS = ("slug", "sku", "name", "priceAtomic", "pricing", "minAmountAtomic",
                  "maxAmountAtomic", "riskMode", "riskPolicy.trustedServerCharge.enabled",
                  "riskPolicy.trustedServerCharge.paymentProofRequired",
                  "riskPolicy.trustedServerCharge.maxAmountAtomic", "fulfillmentAdapter",
                  "fulfillmentConfig", "status")


@dataclass(frozen=True)
class Change:
    field: str
    before: Any
    after: Any

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.field, "before": self.before, "after": self.after}


@dataclass
class Op:
    op: str  # create | update | disable | unchanged
    resource: str  # app | runtime | product | webhook
    key: str  # the app or product slug, the runtime origin or the webhook URL
    changes: list[Change] = field(default_factory=list)
    id: str | None = None
    # What apply hands to the resource's own functions (wire names); not shown.
    spec: dict[str, Any] = field(default_factory=dict, repr=False)

    def as_dict(self, *, withheld: bool = True) -> dict[str, Any]:
        """The op as plans, apply answers and revisions show it: a value that looks like a
        secret, which only a change made outside config can bring (the file passed the
        guard), reads ``WITHHELD``. ``withheld=False``: the values themselves, for the
        digest only, so that a plan still names the exact changes it was made for."""
        shown = {"op": self.op, "resource": self.resource, "key": self.key, "id": self.id,
                 "changes": [c.as_dict() for c in self.changes]}
        return withhold_secrets(shown) if withheld else shown


@dataclass
class Plan:
    app_slug: str
    mode: str
    base_revision: str | None
    ops: list[Op] = field(default_factory=list)
    errors: list[Problem] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    missing_secrets: list[dict[str, str]] = field(default_factory=list)
    runtime_validation: dict[str, Any] | None = None

    @property
    def summary(self) -> dict[str, int]:
        counts = {"create": 0, "update": 0, "disable": 0, "unchanged": 0}
        for op in self.ops:
            counts[op.op] += 1
        return counts

    @property
    def changes_anything(self) -> bool:
        return any(op.op != "unchanged" for op in self.ops)

    @property
    def write_scopes(self) -> list[str]:
        """The scopes carrying out this plan needs, in the order of its ops; none when it
        changes nothing."""
        return list(dict.fromkeys(WRITE_SCOPES[op.resource] for op in self.ops
                                  if op.op != "unchanged"))

    @property
    def digest(self) -> str:
        """Names this plan: apply refuses a saved plan whose changes are no longer those."""
        canonical = json.dumps({"ops": [o.as_dict(withheld=False) for o in self.ops],
                                "mode": self.mode,
                                "base": self.base_revision}, sort_keys=True, default=str)
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()

    def as_dict(self) -> dict[str, Any]:
        return {"app": self.app_slug, "mode": self.mode, "baseRevision": self.base_revision,
                "digest": self.digest, "ops": [o.as_dict() for o in self.ops],
                "summary": self.summary, "errors": [p.as_dict() for p in self.errors],
                "warnings": self.warnings, "missingSecrets": self.missing_secrets,
                "runtimeValidation": self.runtime_validation}


@dataclass(frozen=True)
class Context:
    """What planning needs beyond the database: the URL rules and the runtime URL."""

    policy: UrlPolicy
    runtime_url: Callable[[str], str]


def head_revision(session: Session, app: App | None) -> ConfigRevision | None:
    if app is None:
        return None
    return session.scalar(select(ConfigRevision).where(ConfigRevision.app_id == app.id)
                          .order_by(ConfigRevision.number.desc()).limit(1))


def make_plan(session: Session, app: App | None, document: dict[str, Any], mode: str,
              context: Context, *, restores_state: bool = False) -> Plan:
    """``restores_state``: ``document`` is a revision's recorded state (a rollback), which
    names the runtime whenever the app had one, so a runtime it leaves out was configured
    since and is disabled, as mirror disables the products and webhook it leaves out. A file
    applied in mirror mode leaves an undeclared runtime alone: spec 4.8's mirror disables
    products and webhooks only, and a file without ``runtime`` says nothing about it."""
    declared_app = document["app"]
    slug = declared_app["slug"]
    head = head_revision(session, app)
    plan = Plan(slug, mode, head.id if head else None)
    plan.ops.append(_app_op(session, app, declared_app, context, plan))
    runtime_served = bool(app and app.runtime_served)
    if "runtime" in document:
        plan.ops.append(_runtime_op(app, document["runtime"], context, plan))
    elif restores_state and app is not None and app.runtime_status in RUNNING:
        plan.ops.append(_runtime_disable_op(app))
    plan.ops += _product_ops(session, app, document.get("products"), mode, plan)
    webhook = _webhook_op(session, app, slug, document.get("webhooks"), mode, runtime_served,
                          context, plan)
    if webhook is not None:
        plan.ops.append(webhook)
    _secrets_and_runtime_inputs(session, app, document, context, plan)
    return plan


def _app_op(session: Session, app: App | None, declared: dict[str, Any], context: Context,
            plan: Plan) -> Op:
    wanted: dict[str, Any] = {}
    if "name" in declared:
        wanted["name"] = declared["name"].strip()
    if "kind" in declared:
        wanted["kind"] = declared["kind"]
    if "tags" in declared:
        wanted["tags"] = declared["tags"]
    # The API's rules, each problem at its path (the schema has already judged the shape).
    checks: dict[str, Callable[[Any], Any]] = {
        "entryUrl": lambda url: check_entry_url_field(url, context.policy, declared["slug"]),
        "distributionTargets": check_distribution_targets,
        "payTo": check_pay_to,
    }
    for wire, check in checks.items():
        if wire in declared:
            try:
                wanted[wire] = check(declared[wire])
            except ApiError as error:
                plan.errors.append(Problem(f"$.app.{wire}", error.code, error.message))
    if app is None:
        try:
            check_slug(declared["slug"])
        except ApiError as error:
            plan.errors.append(Problem("$.app.slug", error.code, error.message))
        if session.scalar(select(App.id).where(App.slug == declared["slug"])) is not None:
            plan.errors.append(Problem("$.app.slug", "slug_taken", f"The slug "
                                       f"'{declared['slug']}' belongs to another organization."))
        if "name" not in wanted or not wanted["name"]:
            plan.errors.append(Problem("$.app.name", "missing_field",
                                       "'name' is required to create the app."))
        return Op("create", "app", declared["slug"],
                  [Change(k, None, v) for k, v in wanted.items()], spec=wanted)
    current = {"name": app.name, "kind": app.type.value.lower(), "entryUrl": app.entry_url,
               "payTo": app.pay_to, "distributionTargets": list(app.distribution_targets),
               "tags": list(app.tags)}
    changes = [Change(k, current[k], v) for k, v in wanted.items() if current[k] != v]
    return Op("update" if changes else "unchanged", "app", app.slug, changes, app.id,
              spec={c.field: c.after for c in changes})


def _runtime_op(app: App | None, declared: dict[str, Any], context: Context,
                plan: Plan) -> Op:
    key = declared["origin"]
    try:
        checked = check_runtime_origin(declared["origin"], context.policy)
    except UrlRefused as exc:
        plan.errors.append(Problem("$.runtime.origin", exc.code, exc.message))
        return Op("unchanged", "runtime", key)
    origin = f"{checked.scheme}://{checked.host_header}"  # stored canonical, as the API does
    app_path = declared.get("appPath", app.runtime_app_path if app else "/")
    # The runtime API's rule (and the manifest's, so verification can pass): no "//host",
    # dot segment, whitespace or control character.
    if not is_concrete_path(app_path):
        saved = "" if "appPath" in declared else (
            f" The saved one ({json.dumps(app_path)}) is not: declare one.")
        plan.errors.append(Problem("$.runtime.appPath", "invalid_field", (
            "'appPath' must be a concrete path such as \"/\" or \"/play\" (starting with "
            "one '/', no query, fragment, dot segment or whitespace, at most "
            f"{MAX_PATH_LENGTH} characters).{saved}")))
    wanted = {"origin": origin, "appPath": app_path}
    if app is None or app.runtime_status is RuntimeStatus.NOT_CONFIGURED:
        return Op("create", "runtime", origin, [Change(k, None, v) for k, v in wanted.items()],
                  spec=wanted)
    current = {"origin": app.runtime_origin, "appPath": app.runtime_app_path}
    changes = [Change(k, current[k], v) for k, v in wanted.items() if current[k] != v]
    return Op("update" if changes else "unchanged", "runtime", origin, changes, spec=wanted)


def _runtime_disable_op(app: App) -> Op:
    """Disable (never remove) a runtime the restored state does not have: its origin and
    paths are kept, and ``svc runtime verify`` turns it on again (spec 3.1)."""
    return Op("disable", "runtime", str(app.runtime_origin),
              [Change("status", app.runtime_status.value, RuntimeStatus.DISABLED.value)])


def _flat(view: dict[str, Any]) -> dict[str, Any]:
    trusted = view["riskPolicy"]["trustedServerCharge"]
    flat = {k: view.get(k) for k in PRODUCT_FIELDS if "." not in k}
    for name in ("enabled", "paymentProofRequired", "maxAmountAtomic"):
        flat[f"riskPolicy.trustedServerCharge.{name}"] = trusted[name]
    return flat


def _product_ops(session: Session, app: App | None, declared: list[dict[str, Any]] | None,
                 mode: str, plan: Plan) -> list[Op]:
    """Products match by sku (spec 2.3: "match key for product upsert"; the slug when the
    file gives none), as ``svc product upsert`` matches them: a new slug on a known sku
    renames that product, and a new sku is a new product, even on a slug in use."""
    rows = list(session.scalars(select(Product).where(Product.app_id == app.id))) if app else []
    by_sku = {p.sku: p for p in rows}
    by_slug = {p.slug: p for p in rows}
    ops = []
    first: dict[str, int] = {}  # each declared sku: where the file declares it
    for index, wanted in enumerate(declared or []):
        sku = sku_of(wanted)
        if first.setdefault(sku, index) != index:  # "gem" and "gem ": one sku once stored
            plan.errors.append(Problem(json_path(["products", index, "sku"]),
                                       "config_duplicate", f"sku '{sku}' is also declared at "
                                       f"{json_path(['products', first[sku]])}."))
            continue
        spec = {**wanted, "status": ProductStatus.ACTIVE.value}
        current = by_sku.get(sku)
        holder = by_slug.get(wanted["slug"])
        if holder is not None and holder is not current:
            plan.errors.append(Problem(json_path(["products", index, "slug"]),
                                       "product_exists",
                                       slug_taken(wanted, sku, holder, current)))
            continue
        # Checked on a draft: the real row changes only in apply, with these same rules.
        draft = ProductDraft.of(current) if current is not None else ProductDraft()
        try:
            apply_product_fields(draft, spec, creating=current is None)
        except ApiError as error:
            where = error.extra.get("field")
            path = json_path(["products", index, *str(where).split(".")]) if where else \
                json_path(["products", index])
            plan.errors.append(Problem(path, error.code, error.message))
            continue
        after = _flat(product_view(draft, "", ""))
        if current is None:  # the key names the slug: no "slug" change to show
            ops.append(Op("create", "product", draft.slug,
                          [Change(k, None, v) for k, v in after.items()
                           if v is not None and k != "slug"], spec=spec))
            continue
        before = _flat(product_view(current, "", ""))
        changes = [Change(k, before[k], after[k]) for k in PRODUCT_FIELDS
                   if before[k] != after[k]]
        if current.slug != draft.slug:
            plan.warnings.append(renamed(plan.app_slug, current, draft.slug))
        ops.append(Op("update" if changes else "unchanged", "product", draft.slug, changes,
                      current.id, spec=spec))
    for product in sorted(rows, key=lambda p: p.slug):
        if product.sku in first or product.status is not ProductStatus.ACTIVE:
            continue
        if mode == "mirror":
            ops.append(Op("disable", "product", product.slug,
                          [Change("status", "active", "disabled")], product.id))
        else:
            plan.warnings.append({
                "code": "undeclared_product", "key": product.slug,
                "message": f"Product '{product.slug}' is active but not in the file (no "
                           f"product there has its sku '{product.sku}'); merge leaves it as it "
                           "is (mirror would disable it)."})
    return ops


def _webhook_op(session: Session, app: App | None, slug: str,
                declared: list[dict[str, Any]] | None, mode: str, runtime_served: bool,
                context: Context, plan: Plan) -> Op | None:
    endpoint = (session.scalar(select(WebhookEndpoint).where(WebhookEndpoint.app_id == app.id))
                if app else None)
    if not declared:
        if endpoint is None or endpoint.status is not EndpointStatus.ENABLED:
            return None
        if mode == "mirror":
            return Op("disable", "webhook", endpoint.url,
                      [Change("status", "enabled", "disabled")], endpoint.id)
        plan.warnings.append({"code": "undeclared_webhook", "key": endpoint.url,
                              "message": "The app's webhook endpoint is enabled but not in the "
                                         "file; merge leaves it (mirror would disable it)."})
        return None
    wanted = declared[0]
    try:
        checked = check_webhook_url(wanted["url"], context.policy, app_slug=slug,
                                    runtime_active=runtime_served)
    except UrlRefused as exc:
        plan.errors.append(Problem("$.webhooks[0].url", exc.code,
                                   f"Webhook URL refused: {exc.message}."))
        return None
    # Left out, events are left alone like any other field; a new endpoint gets the default.
    events = wanted.get("events") or (list(endpoint.events) if endpoint else DEFAULT_EVENTS)
    after = {"url": checked.url, "events": list(events), "status": EndpointStatus.ENABLED.value}
    if endpoint is None:
        return Op("create", "webhook", checked.url,
                  [Change(k, None, v) for k, v in after.items()], spec=after)
    before = {"url": endpoint.url, "events": list(endpoint.events),
              "status": endpoint.status.value}
    changes = [Change(k, before[k], after[k]) for k in after if before[k] != after[k]]
    return Op("update" if changes else "unchanged", "webhook", checked.url, changes,
              endpoint.id, spec=after)


def _secrets_and_runtime_inputs(session: Session, app: App | None, document: dict[str, Any],
                                context: Context, plan: Plan) -> None:
    """The secrets the runtime will need that the config cannot carry, and what a runtime
    verification will check (spec 2.8, 4.11)."""
    slug = document["app"]["slug"]
    hooks = [op for op in plan.ops if op.resource == "webhook"]
    if hooks and hooks[0].op == "create":
        plan.missing_secrets.append({
            "name": "SVC_WEBHOOK_SECRET", "status": "issued_on_apply",
            "message": "Apply creates the webhook endpoint and shows its zwhsec_ signing secret "
                       "once: store it in your runtime's environment."})
    elif app is not None and hooks:
        plan.missing_secrets.append({
            "name": "SVC_WEBHOOK_SECRET", "status": "issued",
            "message": "Issued when the endpoint was created; if it is lost, `svc webhook "
                       "rotate` issues a new one."})
    has_key = app is not None and session.scalar(
        select(ApiKey.id).where(ApiKey.app_id == app.id, ApiKey.revoked_at.is_(None))
        .limit(1)) is not None
    if not has_key:
        plan.missing_secrets.append({
            "name": "SVC_API_KEY", "status": "none",
            "message": "The app has no active backend key; create one with `svc keys create` "
                       "(shown once) if your backend calls the API."})
    _runtime_inputs(session, app, slug, document, context, plan)


def _runtime_inputs(session: Session, app: App | None, slug: str, document: dict[str, Any],
                    context: Context, plan: Plan) -> None:
    """What ``svc runtime verify`` will require of the runtime this config leaves: the
    manifest's values (``manifest.rules``; its paths are the rules' constants, whatever the
    webhook URL's path), and a warning when the webhook is registered on the runtime origin
    at another path than the one verification probes there."""
    runtime = next((op for op in plan.ops if op.resource == "runtime"), None)
    origin = runtime.spec.get("origin") if runtime else (app.runtime_origin if app else None)
    if not origin:
        return
    if runtime is not None:
        app_path = runtime.spec["appPath"]
        entry_path = entry_path_after(app, app_path)
    else:
        assert app is not None  # an origin without a runtime op is the saved one
        app_path, entry_path = app.runtime_app_path, app.runtime_entry_path
    pay_to = document["app"].get("payTo", app.pay_to if app else None)
    plan.runtime_validation = {
        "origin": origin, "manifestUrl": f"{origin}{MANIFEST_PATH}", "appPath": app_path,
        "expected": {"appId": app.id if app else None, "appSlug": slug, "payTo": pay_to,
                     "webhookPath": WEBHOOK_PATH,
                     "paymentSubmittedPath": PAYMENT_SUBMITTED_PATH, "entryPath": entry_path},
        "returnUrl": f"{context.runtime_url(slug)}/svc-auth-return?app={slug}",
    }
    webhook_url = _registered_webhook(session, app, plan)
    if webhook_url is None:
        return
    parts = urlsplit(webhook_url)
    if same_origin(f"{parts.scheme}://{parts.netloc}", origin) and parts.path != WEBHOOK_PATH:
        plan.warnings.append({
            "code": "webhook_path_not_verified", "key": webhook_url,
            "message": f"The webhook URL is on the runtime origin at {parts.path or '/'}, but "
                       f"runtime verification requires the manifest's webhookPath to be "
                       f"{WEBHOOK_PATH} and probes POST {WEBHOOK_PATH} on the runtime origin "
                       f"(it must answer 401 to an unsigned request): serve your webhook "
                       f"handler at {WEBHOOK_PATH} and register that URL."})


def _registered_webhook(session: Session, app: App | None, plan: Plan) -> str | None:
    """The webhook endpoint URL enabled once this plan is applied, if any."""
    hook = next((op for op in plan.ops if op.resource == "webhook"), None)
    if hook is not None:
        url = hook.spec.get("url") if hook.op != "disable" else None
        return str(url) if url else None
    if app is None:
        return None
    return session.scalar(select(WebhookEndpoint.url).where(
        WebhookEndpoint.app_id == app.id, WebhookEndpoint.status == EndpointStatus.ENABLED))


def entry_path_after(app: App | None, app_path: str) -> str:
    """The entry path a runtime saved with ``app_path`` has: it follows the app path (as
    ``svc runtime configure``'s default does) unless the console or the CLI set it apart."""
    if app is None or app.runtime_entry_path in (None, app.runtime_app_path):
        return app_path
    return app.runtime_entry_path
