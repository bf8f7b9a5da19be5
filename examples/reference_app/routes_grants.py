"""The routes that grant outside the webhook: ``payment-submitted``, ``reconcile`` and
``trusted-charge`` (spec 4.9). Each grants only from a trusted source, and through the same
``grant_once`` as the webhook, so any order of arrival grants once."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from examples.reference_app.context import AppContext, context_of, player_of
from examples.reference_app.errors import (
    BACKEND_FAILURES,
    AppError,
    from_backend,
    read_json,
    text_field,
)
from examples.reference_app.fulfil import from_delivery, from_proof, grant
from examples.reference_app.players import Player
from examples.reference_app.store import DELIVERY_KEY_PREFIX, Grant
from svc.backend import STATUS_UNPROVEN, Delivery, TrustedCharge
from svc.proofs import ProofError, proof_grantable, verify_payment_proof


async def payment_submitted(request: Request) -> JSONResponse:
    """Callback recovery: a verified ``paymentProof`` that says ``delivered``, or a trusted
    lookup of ``deliveryId`` (or of the proof's, when it does not say so)."""
    context = context_of(request)
    player_of(request)
    body = await read_json(request)
    proof = body.get("paymentProof")
    if proof is not None:
        try:
            payload = verify_payment_proof(proof, context.backend_key())
        except ProofError as exc:
            raise AppError("payment_proof_invalid", 422, str(exc)) from None
        return JSONResponse(await grant_proof(context, payload))
    delivery_id = text_field(body, "deliveryId", max_length=64, prefix="ztdlv_")
    assert delivery_id is not None
    return JSONResponse(await grant_delivery(context, delivery_id, "lookup"))


async def reconcile(request: Request) -> JSONResponse:
    """Idempotent: the existing grant of a handled ``deliveryId`` or ``idempotencyKey``;
    otherwise the delivery is looked up (by id, else by key) and granted once. A key under
    which the service holds no delivery answers ``status: not_charged``: the only answer
    that lets the page say nothing was charged. A delivery not ready yet is
    ``delivery_not_ready`` (409); a service that cannot be asked, 502/503: either way the
    page keeps the purchase."""
    context = context_of(request)
    player = player_of(request)
    body = await read_json(request)
    delivery_id = text_field(body, "deliveryId", required=False, max_length=64,
                             prefix="ztdlv_")
    key = text_field(body, "idempotencyKey", required=False, max_length=260)
    if delivery_id is None and key is None:
        raise AppError("missing_field", 422, "Send 'deliveryId' or 'idempotencyKey'.",
                       field="deliveryId")
    existing = await context.in_store(lambda: context.fulfilment.find(
        delivery_id=delivery_id, idempotency_key=key))
    if existing is not None:
        return JSONResponse(_already(existing, player))
    if delivery_id is not None:
        return JSONResponse(await grant_delivery(context, delivery_id, "reconcile"))
    assert key is not None
    delivery = await look_up_key(context, key)
    if delivery is None:
        return JSONResponse({"status": "not_charged", "granted": False, "grant": None})
    if delivery.developer_user_id != player.user_id:  # as for _already: not theirs to see
        raise AppError("not_found", 404, "No grant of yours with this id or key.")
    return JSONResponse(await grant(context, from_delivery(context, delivery, "reconcile")))


def _already(existing: Grant, player: Player) -> dict[str, Any]:
    """A grant made before, shown to its own player only (ids and keys are guessable
    enough that another player should not read them back)."""
    if existing.developer_user_id != player.user_id:
        raise AppError("not_found", 404, "No grant of yours with this id or key.")
    return {"status": "granted", "granted": False, "grant": existing.view()}


async def look_up(context: AppContext, delivery_id: str) -> Delivery:
    """The delivery as the service has it now, with the app's key (the reconcile helper)."""
    try:
        return await context.backend().reconcile_delivery(delivery_id)
    except BACKEND_FAILURES as exc:
        raise from_backend(exc) from None


async def look_up_key(context: AppContext, key: str) -> Delivery | None:
    """The delivery paid under ``key`` (as the app sent it, or in the delivery's
    ``svc:`` form), or ``None`` when the service says none has it: nothing was charged."""
    sent = key.removeprefix(DELIVERY_KEY_PREFIX)  # our keys are ref:…, never svc:…
    try:
        return await context.backend().get_delivery_by_key(
            sent, app=context.settings.app_id)
    except BACKEND_FAILURES as exc:
        raise from_backend(exc) from None


async def grant_delivery(context: AppContext, delivery_id: str, source: str
                         ) -> dict[str, Any]:
    """Look the delivery up, grant once if it is ``delivered``."""
    return await grant(context, from_delivery(context, await look_up(context, delivery_id),
                                              source))


async def grant_proof(context: AppContext, payload: dict[str, Any]) -> dict[str, Any]:
    """A verified proof grants by itself only when it says ``delivered``. Otherwise its
    delivery is looked up, as a ``deliveryId`` would be: ``awaiting_settlement`` (a
    ``settled_first`` product) may have settled since the proof was issued, and a proof
    issued before proofs carried the status says nothing about it."""
    candidate = from_proof(context, payload)
    if proof_grantable(payload):
        return await grant(context, candidate)
    return await grant_delivery(context, candidate.delivery_id, "lookup")


async def trusted_charge(request: Request) -> JSONResponse:
    """Charge the player's connected wallet with the ``zpk_`` key (spec 4.4): refresh the
    handoff, require ``ready`` on the connection the page expects, charge, verify the
    ``paymentProof`` (the SDK does, with this key), grant once when it says ``delivered``;
    202 ``pending`` when the delivery awaits settlement."""
    context = context_of(request)
    player = player_of(request)
    body = await read_json(request)
    item = context.catalogue.by_slug(text_field(body, "productSlug", max_length=64))
    if item is None:
        raise AppError("product_not_found", 404, "This app does not sell that product.")
    if item.product_id is None:
        raise AppError("product_id_unknown", 409, "The catalogue has no product id for "
                       f"'{item.slug}'; buy it through the product route.")
    key = text_field(body, "idempotencyKey", max_length=180)
    expected = text_field(body, "accountConnectionId", required=False, max_length=64)
    order_id = text_field(body, "orderId", required=False, max_length=64, prefix="zord_")
    existing = await context.in_store(lambda: context.fulfilment.find(idempotency_key=key))
    if existing is not None:  # a retry of a purchase already granted: charge nothing
        return JSONResponse(_already(existing, player))
    backend = context.backend()
    try:
        handoff = await backend.create_account_handoff(
            app_slug=context.settings.app_slug, merchant_user_id=player.user_id,
            game_account_label=player.name, return_url=context.settings.return_url)
        if handoff.status != "ready" or handoff.connection is None:
            raise AppError("handoff_not_ready", 409, "Payment is not ready for this account: "
                           "open the portal first.", handoff=handoff.client_safe())
        if expected is not None and expected != handoff.connection.id:
            raise AppError("ACCOUNT_CONNECTION_MISMATCH", 409, "The account is connected to "
                           "another wallet than this purchase expected.")
        assert item.product_id is not None and key is not None
        charge = await backend.create_trusted_server_charge(
            product_id=item.product_id, account_connection_id=handoff.connection.id,
            developer_user_id=player.user_id, idempotency_key=key, order_id=order_id)
    except ProofError as exc:
        # The service's answer did not verify with our key: never grant (spec 1.4 item 3).
        raise AppError("payment_proof_invalid", 502, str(exc), retryable=False) from None
    except BACKEND_FAILURES as exc:
        raise from_backend(exc) from None
    return await _grant_charge(context, charge)


async def _grant_charge(context: AppContext, charge: TrustedCharge) -> JSONResponse:
    remaining = None if charge.remaining is None else str(charge.remaining)
    delivery, candidate = charge.delivery, None
    if delivery.grantable:  # the signed proof says delivered
        candidate = from_proof(context, charge.proof)
    elif charge.status == STATUS_UNPROVEN:
        # A replay of a charge made before proofs carried the status: ask the service.
        delivery = await look_up(context, delivery.id)
        if delivery.grantable:
            candidate = from_delivery(context, delivery, "lookup")
    if candidate is None:
        # A settled_first product (spec 1.6): paid, but not to be fulfilled before the chain
        # settles; payment.delivered (or a later reconcile) grants it then.
        return JSONResponse({"status": "pending", "granted": False, "grant": None,
                             "deliveryId": delivery.id, "deliveryStatus": delivery.status,
                             "remaining": remaining}, status_code=202)
    answer = await grant(context, candidate)
    return JSONResponse({**answer, "remaining": remaining}, status_code=201)
