"""The player's side before a payment: log in, start a purchase, a backend order, the
account handoff (spec 4.2, 4.5, 4.9)."""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import JSONResponse

from examples.reference_app.catalogue import Item
from examples.reference_app.context import AppContext, context_of, player_of
from examples.reference_app.errors import AppError, from_backend, read_json, text_field
from examples.reference_app.players import SessionError
from examples.reference_app.routes_grants import BACKEND_FAILURES
from svc.backend import new_idempotency_key

KEY_PREFIX = "ref"


async def log_in(request: Request) -> JSONResponse:
    """The demo login: a signed session for a player name (no password; see players.py)."""
    body = await read_json(request)
    name = text_field(body, "name", max_length=40)
    assert name is not None
    try:
        player, token = context_of(request).signer.issue(name.strip())
    except SessionError as exc:
        raise AppError("invalid_field", 422, str(exc), field="name") from None
    return JSONResponse({"player": player.view(), "token": token},
                        headers={"cache-control": "no-store"})


async def whoami(request: Request) -> JSONResponse:
    return JSONResponse({"player": player_of(request).view()})


def _item(context: AppContext, body: dict[str, object]) -> Item:
    item = context.catalogue.by_slug(body.get("productSlug"))
    if item is None:
        raise AppError("product_not_found", 404, "This app does not sell that product.",
                       field="productSlug")
    return item


async def purchase(request: Request) -> JSONResponse:
    """The app-owned purchase stub: a new intent the page saves before anything else (the
    idempotency key every retry of this purchase reuses); with ``withOrder`` a backend
    order fixes it on the service too."""
    context = context_of(request)
    player = player_of(request)
    body = await read_json(request)
    item = _item(context, body)
    key = new_idempotency_key(KEY_PREFIX, item.slug)
    order_id = None
    if body.get("withOrder") is True:
        order_id = (await _create_order(context, item, player.user_id, key))["id"]
    return JSONResponse({"purchase": {
        "productSlug": item.slug, "idempotencyKey": key, "developerUserId": player.user_id,
        "orderId": order_id, "createdAt": datetime.now(UTC).isoformat()}}, status_code=201)


async def order(request: Request) -> JSONResponse:
    """A backend order with the ``zpk_`` key (spec 4.2)."""
    context = context_of(request)
    player = player_of(request)
    body = await read_json(request)
    item = _item(context, body)
    key = text_field(body, "idempotencyKey", required=False, max_length=180) \
        or new_idempotency_key(KEY_PREFIX + "-order", item.slug)
    created = await _create_order(context, item, player.user_id, key)
    return JSONResponse({"order": created}, status_code=201)


async def _create_order(context: AppContext, item: Item, user_id: str,
                        key: str) -> dict[str, object]:
    if item.product_id is None:
        raise AppError("product_id_unknown", 409, "The catalogue has no product id for "
                       f"'{item.slug}', so no order can be made for it.")
    try:
        made = await context.backend().create_order(
            product_id=item.product_id, developer_user_id=user_id, idempotency_key=key)
    except BACKEND_FAILURES as exc:
        raise from_backend(exc) from None
    return {"id": made.id, "status": made.status, "amountAtomic": str(made.amount_atomic),
            "productSlug": item.slug, "paymentUrl": made.payment_url}


async def account_handoff(request: Request) -> JSONResponse:
    """Refresh the player's handoff; only the client-safe projection leaves the server
    (spec 4.5): never ``authorization.authorizationCode``."""
    context = context_of(request)
    player = player_of(request)
    try:
        handoff = await context.backend().create_account_handoff(
            app_slug=context.settings.app_slug, merchant_user_id=player.user_id,
            game_account_label=player.name, return_url=context.settings.return_url)
    except BACKEND_FAILURES as exc:
        raise from_backend(exc) from None
    return JSONResponse(handoff.client_safe(), headers={"cache-control": "no-store"})
