"""Carrying out a plan, and recording it as a revision, in the caller's one transaction.

Each op goes through the function the rest of the API uses for the same change
(``new_product``, ``apply_product_fields``, ``operations.configure``, the webhook
endpoint functions), so config-as-code cannot do what the API would refuse.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from manifest.url_policy import check_webhook_url
from payments.apps import set_pay_to
from payments.config.models import ConfigRevision
from payments.config.plan import (
    KINDS,
    Context,
    Op,
    Plan,
    entry_path_after,
    head_revision,
    make_plan,
)
from payments.config.state import recordable_state
from payments.developer.apps import create_developer_app
from payments.developer.auth import Principal
from payments.errors import ApiError
from payments.models import App, Product, ProductStatus
from payments.products import apply_product_fields, new_product
from payments.runtime import operations
from payments.webhooks import endpoints, resend
from payments.webhooks.models import EndpointStatus, WebhookEndpoint
from payments.webhooks.signing_secrets import SecretBox


@dataclass(frozen=True)
class Applied:
    plan: Plan
    app: App
    revision: ConfigRevision | None  # None: nothing changed, nothing recorded
    ids: dict[str, Any]
    secrets: dict[str, str]  # created now, shown once


def conflict(current: str | None, base: str | None) -> ApiError:
    return ApiError("config_conflict", 409, f"Another apply landed since your plan (it was "
                    f"made against {base or 'no revision'}; the app is now at "
                    f"{current or 'no revision'}). Nothing was changed: plan again.",
                    currentRevision=current, baseRevision=base)


def apply_config(session: Session, who: Principal, app: App | None, document: dict[str, Any],
                 mode: str, *, base: str | None, digest: str | None, context: Context,
                 box: SecretBox, now: datetime, rollback_of: str | None = None,
                 notes: list[dict[str, str]] | None = None,
                 restores_state: bool = False) -> Applied:
    """Plan ``document`` under the app's lock and carry the plan out; ``notes`` are warnings
    the caller adds to the plan (a rollback's), ``restores_state`` says ``document`` is a
    revision's state (``make_plan``)."""
    if app is not None:
        operations.lock(session, app)  # applies to one app take turns
    head = head_revision(session, app)
    if (head.id if head else None) != base:
        raise conflict(head.id if head else None, base)
    plan = make_plan(session, app, document, mode, context, restores_state=restores_state)
    plan.warnings += notes or []
    # Checked on the plan made under the lock, before the first write: what a grant may
    # change is what this apply will change, not what an earlier plan showed.
    who.require_scopes(plan.app_slug, plan.write_scopes)
    if plan.errors:
        raise ApiError("config_plan_errors", 422, f"The plan has {len(plan.errors)} blocking "
                       f"error(s); first: {plan.errors[0].path}: {plan.errors[0].message}",
                       errors=[p.as_dict() for p in plan.errors])
    if digest is not None and digest != plan.digest:
        again = ("plan the rollback again (`svc config rollback`, or the plan API with "
                 "{\"revision\": ...})" if rollback_of else "plan again")
        raise ApiError("config_plan_stale", 409, "The app changed since this plan was made "
                       f"(outside config); nothing was changed: {again}.")
    secrets: dict[str, str] = {}
    target = _apply_app(session, who, app, plan.ops[0])
    session.flush()  # configuring the runtime re-reads the row under its lock
    ids: dict[str, Any] = {"app": target.id, "products": {}, "webhook": None}
    for op in plan.ops[1:]:
        if op.resource == "runtime" and op.op == "disable":
            operations.disable(session, target)
        elif op.resource == "runtime" and op.op != "unchanged":
            operations.configure(session, target, op.spec["origin"], op.spec["appPath"],
                                 entry_path_after(target, op.spec["appPath"]))
        elif op.resource == "webhook":
            ids["webhook"] = _apply_webhook(session, target, op, context, box, now, secrets)
            if op.op == "update":  # a declared endpoint is enabled: it may have been off
                plan.warnings += _left_unsent(session, ids["webhook"], target.slug)
    ids["products"] = apply_product_ops(session, target,
                                        [op for op in plan.ops if op.resource == "product"])
    revision = None
    if plan.changes_anything:
        revision = ConfigRevision(
            app_id=target.id, number=(head.number + 1) if head else 1, mode=mode,
            config=document, state=_state(session, target, document, plan),
            ops=[o.as_dict() for o in plan.ops],
            summary=plan.summary,
            applied_by=who.developer_id, via="cli" if who.grant else "console",
            rollback_of=rollback_of, created_at=now)
        session.add(revision)
        try:
            with session.begin_nested():
                session.flush()
        except IntegrityError:  # a concurrent apply took this number first
            raise conflict(None, base) from None
    ids["revision"] = revision.id if revision else None
    return Applied(plan, target, revision, ids, secrets)


def _left_unsent(session: Session, endpoint_id: str, slug: str) -> list[dict[str, Any]]:
    """The events skipped while the endpoint was disabled that enabling it left unsent, as
    the webhook API's answers count them (``skippedWhileDisabled``): a warning, as the
    spec's compact apply result has no other place for it (docs/decisions.md)."""
    endpoint = session.get(WebhookEndpoint, endpoint_id)
    assert endpoint is not None
    count = resend.count_skipped_while_disabled(session, endpoint)
    if not count or endpoint.status is not EndpointStatus.ENABLED:
        return []
    return [{"code": "webhook_skipped_while_disabled", "key": endpoint.url,
             "skippedWhileDisabled": count,
             "message": f"{count} event(s) came due while the endpoint was disabled and were "
                        "not sent; resend them in the order they were created with "
                        f"`svc webhook resend-skipped --app {slug}`."}]


def _state(session: Session, app: App, document: dict[str, Any],
           plan: Plan) -> dict[str, Any] | None:
    """The state this apply leaves, to record with its revision; None, and a warning on the
    plan, when it cannot be recorded."""
    session.flush()  # read back from the rows just written, in this transaction
    state, problem = recordable_state(session, app, document)
    if problem is not None:
        plan.warnings.append({
            "code": "state_not_recorded", "key": problem.path,
            "message": f"The app's state after this apply holds a value at {problem.path} "
                       f"that a revision cannot record ({problem.message}), so this revision "
                       "keeps only its config as sent: a rollback to it applies that config "
                       "again and leaves what it does not name as it is then."})
    return state


def _apply_app(session: Session, who: Principal, app: App | None, op: Op) -> App:
    spec = op.spec
    if app is None:
        app = create_developer_app(
            session, who, name=spec["name"], slug=op.key,
            app_type=KINDS[spec.get("kind", "game")], headline="", pay_to=spec.get("payTo"),
            tags=spec.get("tags", ()))
        if "entryUrl" in spec:
            app.entry_url = spec["entryUrl"]
        if "distributionTargets" in spec:
            app.distribution_targets = spec["distributionTargets"]
        return app
    if "name" in spec:
        app.name = spec["name"]
    if "kind" in spec:
        app.type = KINDS[spec["kind"]]
    if "entryUrl" in spec:
        app.entry_url = spec["entryUrl"]
    if "tags" in spec:
        app.tags = [t.strip() for t in spec["tags"] if t.strip()]
    if "distributionTargets" in spec:
        app.distribution_targets = spec["distributionTargets"]
    if "payTo" in spec:
        set_pay_to(app, spec["payTo"])  # a new pay_to restarts its review, as in the API
    return app


def apply_product_ops(session: Session, app: App, ops: list[Op]) -> dict[str, str]:
    """Carry out the product ops; slug -> id of every declared product.

    A file may hold hundreds of products: the app's rows are loaded in one query (not one
    per op), unchanged ones are left alone, and changed and new ones are written in one
    flush (the plan, made in this transaction under the app's lock, already found the slugs
    they take and the skus of new ones free)."""
    rows = ({p.id: p for p in session.scalars(select(Product).where(Product.app_id == app.id))}
            if any(op.op in ("update", "disable") for op in ops) else {})
    created: dict[str, Product] = {}
    for op in ops:
        if op.op == "create":
            created[op.key] = new_product(app, op.spec)
        elif op.op == "update":
            apply_product_fields(rows[str(op.id)], op.spec, creating=False)
        elif op.op == "disable":
            rows[str(op.id)].status = ProductStatus.DISABLED
    session.add_all(created.values())
    if any(op.op != "unchanged" for op in ops):
        try:  # no savepoint: a refusal rolls the whole apply back
            session.flush()
        except IntegrityError:  # the product API took one of these slugs or skus meanwhile
            raise ApiError("product_exists", 409, "A product took one of the file's slugs or "
                           "skus while this apply ran; nothing was changed: plan "
                           "again.") from None
    return {op.key: created[op.key].id if op.op == "create" else str(op.id) for op in ops}


def _apply_webhook(session: Session, app: App, op: Op, context: Context, box: SecretBox,
                   now: datetime, secrets: dict[str, str]) -> str:
    if op.op == "disable":
        endpoint = session.get(WebhookEndpoint, op.id)
        assert endpoint is not None
        endpoints.update_endpoint(endpoint, checked=None, events=None, enabled=False, now=now)
        return endpoint.id
    checked = check_webhook_url(op.spec["url"], context.policy, app_slug=app.slug,
                                runtime_active=app.runtime_served)
    if op.op == "create":
        created = endpoints.create_endpoint(session, app, checked, op.spec["events"], box, now)
        secrets["webhookSigningSecret"] = created.secret
        return created.endpoint.id
    endpoint = session.get(WebhookEndpoint, op.id)
    assert endpoint is not None
    if op.op == "update":
        endpoints.update_endpoint(
            endpoint, checked=checked, events=op.spec["events"],
            enabled=op.spec["status"] == EndpointStatus.ENABLED.value, now=now)
    return endpoint.id
