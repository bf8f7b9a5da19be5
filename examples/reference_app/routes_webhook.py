"""``POST /api/svc/webhook``: verify over the raw body, grant once, answer (spec 6).

401 unless genuine (the SDK's ``verify_webhook``); a test event grants nothing;
``payment.delivered`` and the legacy ``delivery.created`` twin grant once per delivery;
``payment.settled`` is recorded. A store that is down answers 503, so the service retries
(rule 4). The work is one INSERT, so the answer is fast and the service never times out.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from examples.reference_app.context import context_of
from examples.reference_app.errors import MAX_BODY, AppError
from examples.reference_app.fulfil import from_event, grant
from svc.webhooks import WebhookVerificationError, verify_webhook

GRANTING = ("payment.delivered", "delivery.created")


async def webhook(request: Request) -> JSONResponse:
    context = context_of(request)
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise AppError("payload_too_large", 413, "The body is over 64 KiB.")
    try:
        event = verify_webhook(raw, request.headers.get("x-svc-timestamp", ""),
                               request.headers.get("x-svc-signature", ""),
                               context.settings.webhook_secret)
    except WebhookVerificationError as exc:
        raise AppError("signature_invalid", 401, str(exc)) from None
    if event.test:
        return JSONResponse({"ok": True, "test": True, "granted": False})
    if event.type in GRANTING:
        answer = await grant(context, from_event(event, None))
        return JSONResponse({"ok": True, **answer})
    recorded = await context.in_store(context.fulfilment.record_settlement,
                                      event.delivery.delivery_id, event.id,
                                      event.delivery.settlement_tx_hash)
    return JSONResponse({"ok": True, "settled": True, "recorded": recorded})
