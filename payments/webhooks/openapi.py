"""OpenAPI of the webhook endpoint API (``payments.webhooks.api``) and the legacy event."""

from __future__ import annotations

from typing import Any

GRANT: list[dict[str, list[str]]] = [{"cliGrant": []}, {"consoleSession": []}]
ERR = {"$ref": "#/components/responses/Error"}
STR = {"type": "string"}
NULL_STR = {"type": ["string", "null"]}
EVENTS = {"type": "array", "items": {"enum": ["payment.delivered", "payment.settled",
                                              "delivery.created"]},
          "description": "subscribed event types; default `[\"payment.delivered\"]`"}
APP_REF = {"name": "app", "in": "path", "required": True, "schema": STR,
           "description": "app id (zapp_...) or slug"}
HOOK_REF = {"name": "webhook", "in": "path", "required": True, "schema": STR,
            "description": "webhook endpoint id (zwh_...)"}
ATTEMPT_REF = {"name": "attempt", "in": "path", "required": True, "schema": STR,
               "description": "attempt id (zwha_...) or event id (zevt_...)"}

URL_NOTE = ("URL rules (spec 5.5): public HTTPS only; http, localhost, private, link-local, "
            "CGNAT, IPv4-mapped IPv6, decimal/octal/hex IP spellings, cloud metadata, "
            "`.local`/`.internal`/single-label names and the service's own hosts are refused "
            "(`webhook_url_invalid`, 422, with `rule`); `https://<slug>.{apps_domain}/api/svc/"
            "webhook` only for the same app, that path, and an active runtime. The name must "
            "resolve, every answer to an allowed address (`dns_unavailable`, 503, when DNS "
            "does not answer). A dev-only setting admits loopback and private receivers.")

COMPONENT_SCHEMAS: dict[str, Any] = {
    "WebhookEndpoint": {"type": "object", "additionalProperties": True, "properties": {
        "id": {"type": "string", "pattern": "^zwh_"}, "appId": STR, "url": STR,
        "events": EVENTS, "status": {"enum": ["enabled", "disabled"]},
        "secretPreview": {"type": "string", "description": "`zwhsec_…` and the last four "
                                                          "characters; never the secret"},
        "secretCreatedAt": STR, "createdAt": STR, "updatedAt": STR,
        "skippedWhileDisabled": {
            "type": "integer", "minimum": 0,
            "description": "events of the subscribed types that came due while the endpoint "
                           "was disabled and were skipped, not sent since; "
                           "`POST .../resend-skipped` sends them"}}},
    "WebhookAttempt": {"type": "object", "additionalProperties": True, "properties": {
        "id": {"type": "string", "pattern": "^zwha_"},
        "eventId": {"type": "string", "pattern": "^zevt_"}, "type": STR,
        "test": {"type": "boolean"}, "deliveryId": NULL_STR,
        "status": {"enum": ["pending", "delivered", "failed", "skipped"],
                   "description": "skipped: no enabled endpoint subscribed to the type when "
                                  "it was due; failed: the retry schedule is used up"},
        "attemptCount": {"type": "integer", "description": "requests made so far"},
        "responseStatus": {"type": ["integer", "null"],
                           "description": "the last answer's status; 522 when the origin "
                                          "could not be reached or did not answer in time"},
        "signed": {"type": "boolean"}, "lastError": NULL_STR,
        "nextAttemptAt": {"type": ["string", "null"], "description": "while pending"},
        "inFlight": {"type": "boolean"},
        "queuedBehind": {"type": ["string", "null"],
                         "description": "a resent skipped event: the attempt (`zwha_`) whose "
                                        "request must be answered before this one is sent"},
        "endpointId": NULL_STR, "deliveredAt": NULL_STR,
        "createdAt": STR, "updatedAt": STR}},
    "WebhookTry": {"type": "object", "additionalProperties": True, "properties": {
        "number": {"type": "integer"}, "responseStatus": {"type": ["integer", "null"]},
        "error": NULL_STR, "signed": {"type": "boolean"}, "durationMs": {"type": "integer"},
        "sentAt": STR, "endpointId": NULL_STR}},
}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _op(summary: str, scope: str, *, status: str = "200", body: dict[str, Any] | None = None,
        answer: dict[str, Any] | None = None, errors: tuple[str, ...] = ("404", "422"),
        description: str = "") -> dict[str, Any]:
    text = (f"{summary} {description} CLI grants need the scope `{scope}`; a console session "
            "may act on every app of its organization.").replace("  ", " ")
    responses: dict[str, Any] = {status: {"description": "success"}}
    if answer is not None:
        responses[status]["content"] = {"application/json": {"schema": answer}}
    for code in ("401", "403", *errors, "429"):
        responses[code] = ERR
    op: dict[str, Any] = {"summary": summary, "description": text, "security": GRANT,
                          "tags": ["webhooks"], "responses": responses}
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": body}}}
    return op


def _obj(required: tuple[str, ...] = (), **props: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props,
                              "additionalProperties": True}
    if required:
        schema["required"] = list(required)
    return schema


def webhook_paths() -> dict[str, Any]:
    p = "/api/developer/apps/{app}"
    with_secret = _obj(webhook=_ref("WebhookEndpoint"),
                       secret={"type": "string", "pattern": "^zwhsec_",
                               "description": "the signing secret, in this answer only"})
    one_attempt = _obj(attempt=_ref("WebhookAttempt"))
    return {
        f"{p}/webhooks": {
            "parameters": [APP_REF],
            "get": _op("The app's webhook endpoint, as a list of zero or one (spec 8 item 4).",
                       "apps:read", answer=_obj(webhooks={"type": "array",
                                                          "items": _ref("WebhookEndpoint")})),
            "post": _op("Create the app's one webhook endpoint; the answer carries its "
                        "signing secret, once (`cache-control: no-store`).", "webhooks:write",
                        status="201", body=_obj(("url",), url=STR, events=EVENTS),
                        answer=with_secret, errors=("404", "409", "422", "503"),
                        description=URL_NOTE + " A second endpoint: `webhook_exists` (409)."),
        },
        f"{p}/webhooks/{{webhook}}": {
            "parameters": [APP_REF, HOOK_REF],
            "get": _op("One webhook endpoint.", "apps:read",
                       answer=_obj(webhook=_ref("WebhookEndpoint"))),
            "patch": _op("Change the URL, the subscribed events or `enabled`. A disabled "
                         "endpoint keeps its secret; events due meanwhile are skipped, and the "
                         "answer's `skippedWhileDisabled` counts them (resend them with "
                         "`POST .../resend-skipped`).",
                         "webhooks:write", body=_obj(url=STR, events=EVENTS,
                                                     enabled={"type": "boolean"}),
                         answer=_obj(webhook=_ref("WebhookEndpoint")),
                         errors=("404", "422", "503"), description=URL_NOTE),
        },
        f"{p}/webhooks/{{webhook}}/rotate": {
            "parameters": [APP_REF, HOOK_REF],
            "post": _op("Replace the signing secret; the new one signs every request from "
                        "now on (retries included) and is in this answer only.",
                        "webhooks:write", answer=with_secret),
        },
        f"{p}/webhooks/{{webhook}}/test": {
            "parameters": [APP_REF, HOOK_REF],
            "post": _op("Queue a test event: `payment.delivered`-shaped, `test: true`, "
                        "idempotency key `webhook-test:<event id>`, no charge or delivery "
                        "row. Sent whatever the subscription. The answer does not wait for "
                        "the request; read the attempt for its outcome.", "webhooks:write",
                        status="202", answer=one_attempt),
        },
        f"{p}/webhooks/{{webhook}}/resend-skipped": {
            "parameters": [APP_REF, HOOK_REF],
            "post": _op("Resend the events skipped while the endpoint was disabled "
                        "(`skippedWhileDisabled`): the same event ids, pending again in the "
                        "order they were created, one at a time (each is sent once the one "
                        "before it has been answered). Only skipped events move, so a second "
                        "call resends nothing (`resent: 0`). Test events are left out. "
                        "`webhook_disabled` (409) while the endpoint is disabled.",
                        "webhooks:write", status="202",
                        answer=_obj(("resent", "attempts"),
                                    resent={"type": "integer", "minimum": 0},
                                    attempts={"type": "array", "items": _ref("WebhookAttempt"),
                                              "description": "in the order they are sent"}),
                        errors=("404", "409")),
        },
        f"{p}/webhook-attempts": {
            "parameters": [APP_REF,
                           {"name": "status", "in": "query", "schema": {
                               "enum": ["pending", "delivered", "failed", "skipped"]}},
                           {"name": "type", "in": "query", "schema": STR},
                           {"name": "limit", "in": "query", "schema": {
                               "type": "integer", "minimum": 1, "maximum": 200}},
                           {"name": "before", "in": "query", "schema": STR,
                            "description": "`nextBefore` of the previous page (an opaque "
                            "cursor), or an ISO 8601 time with a zone: the events created "
                            "before it"}],
            "get": _op("The app's events and their delivery state, newest first (by event "
                       "time, then event id), `limit` at a time.",
                       "apps:read", answer=_obj(attempts={"type": "array",
                                                          "items": _ref("WebhookAttempt")},
                                                nextBefore={
                                                    "type": ["string", "null"],
                                                    "description": "opaque cursor: pass as "
                                                    "`before` for the next, older page; null "
                                                    "on the last page"})),
        },
        f"{p}/webhook-attempts/{{attempt}}": {
            "parameters": [APP_REF, ATTEMPT_REF],
            "get": _op("One attempt with the event body and every request made (status, "
                       "error class, duration). Never a header, a signature or a secret "
                       "(spec 5.6 item 3).", "apps:read",
                       answer=_obj(attempt=_ref("WebhookAttempt"), event=_ref("WebhookEvent"),
                                   tries={"type": "array", "items": _ref("WebhookTry")})),
        },
        f"{p}/webhook-attempts/{{attempt}}/retry": {
            "parameters": [APP_REF, ATTEMPT_REF],
            "post": _op("Manual retry: the same event with the same id, due now (spec 6 item "
                        "5). `webhook_attempt_in_flight` (409) while a request is under way.",
                        "webhooks:write", status="202", answer=one_attempt,
                        errors=("404", "409")),
        },
    }


SIGNATURE_NOTE = ("Headers: `x-svc-event`, `x-svc-event-id`, `x-svc-delivery-id`, "
                  "`x-svc-idempotency-key`, `x-svc-timestamp` (ISO 8601, UTC), "
                  "`x-svc-signature: sha256=<hex HMAC-SHA256(signing secret, x-svc-timestamp "
                  "+ \".\" + raw body)>`. Reject timestamps more than 5 minutes off. 2xx means "
                  "delivered; anything else is retried 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and "
                  "10 h later (8 requests, 15 s timeout each).")


def legacy_webhooks() -> dict[str, Any]:
    """``delivery.created``: the legacy twin of ``payment.delivered`` (spec 6, 9 item 4)."""
    return {"delivery.created": {"post": {
        "summary": "Legacy: sent with its own event id beside each payment.delivered, to "
                   "endpoints subscribed to delivery.created.",
        "description": "Same body as payment.delivered except `id` and `type`; the same "
                       "`delivery.idempotencyKey`, so a receiver that grants once per key "
                       "grants once for both. " + SIGNATURE_NOTE,
        "tags": ["webhooks"],
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": _ref("WebhookEvent")}}},
        "responses": {"2XX": {"description": "fulfilled (or already fulfilled)"},
                      "5XX": {"description": "temporarily unavailable; retried"}},
    }}}
