"""``GET /api/inventory`` (the only inventory the page shows) and ``POST
/api/inventory/sync`` (reconcile the deliveries the page knows of, then the inventory)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from examples.reference_app.context import AppContext, context_of, player_of
from examples.reference_app.errors import AppError, read_json
from examples.reference_app.players import Player
from examples.reference_app.routes_grants import grant_delivery

MAX_SYNC = 20


async def inventory(request: Request) -> JSONResponse:
    context = context_of(request)
    return JSONResponse(await _inventory(context, player_of(request)),
                        headers={"cache-control": "no-store"})


async def sync(request: Request) -> JSONResponse:
    context = context_of(request)
    player = player_of(request)
    body = await read_json(request)
    ids = body.get("deliveryIds") or []
    if not isinstance(ids, list) or len(ids) > MAX_SYNC or not all(
            isinstance(i, str) and i.startswith("ztdlv_") and len(i) <= 64 for i in ids):
        raise AppError("invalid_field", 422, f"'deliveryIds' is a list of at most {MAX_SYNC} "
                       "ztdlv_ ids.", field="deliveryIds")
    results = []
    for delivery_id in ids:
        try:
            outcome = await grant_delivery(context, delivery_id, "reconcile")
            results.append({"deliveryId": delivery_id, "status": outcome["status"]})
        except AppError as exc:  # one bad id does not hide the others
            results.append({"deliveryId": delivery_id, "status": "failed", "code": exc.code})
    return JSONResponse({**await _inventory(context, player), "synced": results},
                        headers={"cache-control": "no-store"})


async def _inventory(context: AppContext, player: Player) -> dict[str, Any]:
    lines = await context.in_store(context.fulfilment.inventory, player.user_id)
    items = []
    for line in lines:
        known = context.catalogue.by_id(line.product_id) or context.catalogue.by_slug(
            line.product_slug)
        items.append({"productId": line.product_id,
                      "productSlug": line.product_slug or (known.slug if known else None),
                      "name": known.name if known else (line.product_slug or line.product_id),
                      "count": line.count})
    return {"developerUserId": player.user_id, "items": items}
