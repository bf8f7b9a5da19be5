"""Products and their default templates (spec 2.3)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from payments.errors import ApiError
from payments.http import atomic_amount
from payments.models import App, Pricing, Product, ProductStatus, RiskMode

_PRODUCT_SLUG_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\Z")


@dataclass(frozen=True)
class Template:
    key: str
    slug: str
    name: str
    price_atomic: int | None  # None: the amount is decided per order (Tip Creator)


TEMPLATES = (
    Template("zent", "zent", "Zent", 10_000),
    Template("retry_continue", "retry", "Retry / Continue", 10_000),
    Template("unlock_level", "unlock-level", "Unlock Level", 30_000),
    Template("generate_once", "generate-once", "Generate Once", 50_000),
    Template("export_download", "export", "Export / Download", 100_000),
    Template("tip_creator", "tip", "Tip Creator", None),
)
TEMPLATES_BY_KEY = {t.key: t for t in TEMPLATES}
# Tip Creator's default bounds: 0.01 to 10.00 USDC.
TIP_MIN_ATOMIC, TIP_MAX_ATOMIC = 10_000, 10_000_000


class ProductFields(Protocol):
    """What the field rules and the wire view read and write: a ``Product`` row, or a
    :class:`ProductDraft` of one."""

    @property
    def id(self) -> str | None: ...
    @property
    def template(self) -> str: ...
    slug: str
    sku: str
    name: str
    price_atomic: int
    risk_mode: RiskMode
    pricing: Pricing
    min_amount_atomic: int | None
    max_amount_atomic: int | None
    trusted_charge_enabled: bool
    trusted_charge_proof_required: bool
    trusted_charge_max_atomic: int | None
    fulfillment_adapter: str
    fulfillment_config: dict[str, Any]
    status: ProductStatus


@dataclass
class ProductDraft:
    """A product's fields outside the ORM, for checking a change before making it (the
    config plan drafts every product of a file: an ORM row would cost its attribute
    events and a place in the session each time). The defaults are a new row's."""

    id: str | None = None
    template: str = "custom"
    slug: str = ""
    sku: str = ""
    name: str = ""
    price_atomic: int = 0  # a new product must be given one (apply_product_fields)
    risk_mode: RiskMode = RiskMode.OPTIMISTIC
    pricing: Pricing = Pricing.FIXED
    min_amount_atomic: int | None = None
    max_amount_atomic: int | None = None
    trusted_charge_enabled: bool = False
    trusted_charge_proof_required: bool = True
    trusted_charge_max_atomic: int | None = None
    fulfillment_adapter: str = "webhook"
    fulfillment_config: dict[str, Any] = field(default_factory=dict)
    status: ProductStatus = ProductStatus.ACTIVE

    @classmethod
    def of(cls, product: Product) -> ProductDraft:
        return cls(**{name: getattr(product, name) for name in DRAFT_FIELDS})


DRAFT_FIELDS = tuple(ProductDraft.__dataclass_fields__)


def product_view(product: ProductFields, base_url: str, app_slug: str) -> dict[str, Any]:
    return {
        "id": product.id, "slug": product.slug, "sku": product.sku, "name": product.name,
        "priceAtomic": str(product.price_atomic), "template": product.template,
        "riskMode": product.risk_mode.value, "pricing": product.pricing.value,
        "minAmountAtomic": _opt_str(product.min_amount_atomic),
        "maxAmountAtomic": _opt_str(product.max_amount_atomic),
        "riskPolicy": {"trustedServerCharge": {
            "enabled": product.trusted_charge_enabled,
            "paymentProofRequired": product.trusted_charge_proof_required,
            "maxAmountAtomic": _opt_str(product.trusted_charge_max_atomic),
        }},
        "fulfillmentAdapter": product.fulfillment_adapter,
        "fulfillmentConfig": product.fulfillment_config, "status": product.status.value,
        "paymentRoute": f"{base_url}/api/pay/{app_slug}/{product.slug}",
    }


def _opt_str(value: int | None) -> str | None:
    return None if value is None else str(value)


def create_product(session: Session, app: App, spec: dict[str, Any]) -> Product:
    """Create a product from a template key and/or explicit fields (wire names of 2.3)."""
    product = new_product(app, spec)
    _flush_unique(session, product, new=True)
    return product


def update_product(session: Session, product: Product, spec: dict[str, Any]) -> None:
    """Change ``product`` as ``spec`` says; a slug or sku another product of the app holds
    is refused as ``product_exists`` (409), as on create, not a server error."""
    apply_product_fields(product, spec, creating=False)
    _flush_unique(session, product, new=False)


def _flush_unique(session: Session, product: Product, *, new: bool) -> None:
    """Write ``product`` in a savepoint, so that a slug or sku another product of the app
    holds is 409 ``product_exists`` and the transaction stays usable. A new product is
    added inside the savepoint: its rollback takes the product out of the session too."""
    slug, sku = product.slug, product.sku  # a rolled-back savepoint expires the row
    try:
        with session.begin_nested():
            if new:
                session.add(product)
            session.flush()
    except IntegrityError:
        which = "a product" if new else "another product"
        raise ApiError("product_exists", 409, f"This app already has {which} with slug "
                       f"'{slug}' or sku '{sku}'.") from None


def new_product(app: App, spec: dict[str, Any]) -> Product:
    """The product ``spec`` describes, checked, not yet in a session."""
    template = None
    if (key := spec.get("template")) is not None:
        template = TEMPLATES_BY_KEY.get(key) if isinstance(key, str) else None
        if template is None:
            raise ApiError("invalid_template", 422, f"Unknown template {key!r}; use one of "
                           f"{', '.join(TEMPLATES_BY_KEY)}.")
    product = Product(app_id=app.id, template=template.key if template else "custom",
                      fulfillment_config={}, status=ProductStatus.ACTIVE)
    if template is not None:
        product.slug, product.sku, product.name = template.slug, template.slug, template.name
        if template.price_atomic is None:
            product.pricing = Pricing.DYNAMIC_ORDER
            product.price_atomic = TIP_MIN_ATOMIC
            product.min_amount_atomic, product.max_amount_atomic = TIP_MIN_ATOMIC, TIP_MAX_ATOMIC
        else:
            product.pricing = Pricing.FIXED
            product.price_atomic = template.price_atomic
    apply_product_fields(product, spec, creating=template is None)
    return product


def apply_product_fields(product: ProductFields, spec: dict[str, Any], *,
                         creating: bool) -> None:
    for wire, attr in (("slug", "slug"), ("sku", "sku"), ("name", "name")):
        value = spec.get(wire)
        if value is None:
            if creating and wire != "sku":
                raise ApiError("missing_field", 422, f"'{wire}' is required.", field=wire)
            continue
        if not isinstance(value, str) or not value.strip() or len(value) > 120:
            raise ApiError("invalid_field", 422, f"'{wire}' must be a non-empty string.",
                           field=wire)
        setattr(product, attr, value.strip())
    if creating and not product.sku:
        product.sku = product.slug
    if not _PRODUCT_SLUG_RE.match(product.slug or ""):
        raise ApiError("invalid_field", 422, "Product slugs are lower-case letters, digits "
                       "and hyphens.", field="slug")
    if "priceAtomic" in spec:
        product.price_atomic = atomic_amount(spec["priceAtomic"], "priceAtomic")
    elif creating:
        raise ApiError("missing_field", 422, "'priceAtomic' is required.", field="priceAtomic")
    if "riskMode" in spec:
        product.risk_mode = _enum(RiskMode, spec["riskMode"], "riskMode")
    if "pricing" in spec:
        product.pricing = _enum(Pricing, spec["pricing"], "pricing")
    for wire, attr in (("minAmountAtomic", "min_amount_atomic"),
                       ("maxAmountAtomic", "max_amount_atomic")):
        if wire in spec:
            raw = spec[wire]
            setattr(product, attr, None if raw is None else atomic_amount(raw, wire))
    if "status" in spec:
        product.status = _enum(ProductStatus, spec["status"], "status")
    _apply_policy(product, spec.get("riskPolicy"))
    if "fulfillmentConfig" in spec:
        config = spec["fulfillmentConfig"]
        if not isinstance(config, dict):
            raise ApiError("invalid_field", 422, "'fulfillmentConfig' must be an object.",
                           field="fulfillmentConfig")
        product.fulfillment_config = config
    if "fulfillmentAdapter" in spec:
        if spec["fulfillmentAdapter"] != "webhook":
            raise ApiError("invalid_field", 422, "'fulfillmentAdapter' must be 'webhook'.",
                           field="fulfillmentAdapter")
        product.fulfillment_adapter = "webhook"
    _check_pricing(product)


def _apply_policy(product: ProductFields, policy: Any) -> None:
    if policy is None:
        return
    trusted = policy.get("trustedServerCharge") if isinstance(policy, dict) else None
    if not isinstance(trusted, dict):
        raise ApiError("invalid_field", 422, "'riskPolicy.trustedServerCharge' must be an "
                       "object.", field="riskPolicy")
    for wire, attr in (("enabled", "trusted_charge_enabled"),
                       ("paymentProofRequired", "trusted_charge_proof_required")):
        if wire in trusted:
            if not isinstance(trusted[wire], bool):
                raise ApiError("invalid_field", 422, f"'{wire}' must be a boolean.",
                               field=f"riskPolicy.trustedServerCharge.{wire}")
            setattr(product, attr, trusted[wire])
    if "maxAmountAtomic" in trusted:
        raw = trusted["maxAmountAtomic"]
        # Named in full: a bare "maxAmountAtomic" is the product's dynamic-order bound.
        name = "riskPolicy.trustedServerCharge.maxAmountAtomic"
        cap = None if raw is None else atomic_amount(raw, name)
        if cap == 0:  # as the config schema: no trusted charge at all is enabled: false
            raise ApiError("invalid_amount", 422, f"'{name}' must be above zero, or null for "
                           "no cap; to allow no trusted charges, set 'enabled' to false.",
                           field=name)
        product.trusted_charge_max_atomic = cap


def _check_pricing(product: ProductFields) -> None:
    if product.pricing == Pricing.DYNAMIC_ORDER:
        low, high = product.min_amount_atomic, product.max_amount_atomic
        if low is None or high is None or low <= 0 or low > high:
            raise ApiError("invalid_pricing", 422, "dynamic_order products need "
                           "0 < minAmountAtomic <= maxAmountAtomic.")
    elif product.price_atomic <= 0:
        raise ApiError("invalid_amount", 422, "'priceAtomic' must be greater than zero.",
                       field="priceAtomic")


def _enum(cls: Any, value: Any, name: str) -> Any:
    try:
        return cls(value)
    except ValueError:
        allowed = ", ".join(m.value for m in cls)
        raise ApiError("invalid_field", 422, f"'{name}' must be one of: {allowed}.",
                       field=name) from None


def products_of(session: Session, app: App) -> list[Product]:
    return list(session.scalars(select(Product).where(Product.app_id == app.id)
                                .order_by(Product.created_at, Product.slug)))
