"""Backend API key checks for ledger endpoints (spec 5.1)."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session
from starlette.requests import Request

from payments.apps import app_by_ref
from payments.developer.keys import key_for_secret, require_key_scope
from payments.developer.models import ApiKey
from payments.errors import ApiError
from payments.ids import IdPrefix
from payments.models import App, Product

_TOUCH_EVERY = timedelta(minutes=1)


def presented_key(request: Request) -> str | None:
    """``Authorization: Bearer zpk_...`` or ``x-svc-secret-key: zpk_...``."""
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    header = request.headers.get("x-svc-secret-key")
    return header.strip() if header else None


def authorized_key(session: Session, secret: str | None, scope: str, now: datetime) -> ApiKey:
    key = key_for_secret(session, secret)
    require_key_scope(key, scope)
    if key.last_used_at is None or now - key.last_used_at > _TOUCH_EVERY:
        key.last_used_at = now
    return key


def key_may_use(key: ApiKey, app: App) -> bool:
    if key.app_id is not None:
        return key.app_id == app.id
    return key.organization_id == app.organization_id


def require_app_access(key: ApiKey, app: App | None, what: str) -> App:
    # Someone else's object is "not found", not "forbidden": ids are not disclosed.
    if app is None or not key_may_use(key, app):
        raise ApiError("not_found", 404, f"No such {what} for this API key.")
    return app


def product_for_key(session: Session, key: ApiKey, product_id: str) -> tuple[Product, App]:
    """The product an order or trusted charge names, and its app, if this key may use it.
    A ``productId`` that is not a ``zprod_`` id is usually a slug: the answer says so (it
    says nothing about which products exist)."""
    product = session.get(Product, product_id)
    app = session.get(App, product.app_id) if product else None
    if product is None or app is None or not key_may_use(key, app):
        hint = "" if product_id.startswith(IdPrefix.PRODUCT.value) else (
            " 'productId' is the product's zprod_ id, not its slug: `svc product list "
            "--json` lists each product with its id.")
        raise ApiError("not_found", 404, "No such product for this API key." + hint)
    return product, app


def app_for_key(session: Session, key: ApiKey, ref: str | None) -> App:
    """The app a lookup names (``ref``, an id or slug), else the key's own app. An
    organization key sees several apps, so it must name one: searching them all would make
    the answer depend on what the other apps hold."""
    if ref is None:
        if key.app_id is None:
            raise ApiError("missing_field", 422, "This organization key sees several apps: "
                           "name one with 'app' (its id or slug).", field="app")
        return require_app_access(key, session.get(App, key.app_id), "app")
    return require_app_access(key, app_by_ref(session, ref), "app")
