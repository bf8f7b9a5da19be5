"""OpenAPI 3.1 description of the payment (ledger) endpoints on the API host, spec 4.1-4.6.

The shapes below are what ``routes_authorizations.py``, ``routes_payments.py``,
``routes_lookups.py`` and ``routes_handoffs.py`` return; ``tests/test_openapi_ledger.py``
checks real responses against them with undocumented fields forbidden, and checks that
every ``ApiError`` the ledger raises is listed in
:data:`ERROR_CODES` with its status.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from payments.ledger.charges import DELIVERY_KEY_PREFIX
from payments.ledger.cors import ALLOWED_HEADERS
from payments.ledger.idempotency import MAX_KEY_LENGTH, RETENTION
from payments.ledger.models import (
    AuthorizationStatus,
    ConnectionStatus,
    DeliveryStatus,
    OrderStatus,
    SettlementStatus,
)
from payments.ledger.proofs import SCHEME as PROOF_SCHEME
from payments.ledger.routes_authorizations import OWNER_PROOF_MAX_AGE_SECONDS
from payments.ledger.views import CURRENCY, PAYMENT_MODE
from payments.models import RiskMode
from payments.schemas import WEBHOOK_EVENT, load_schema

# -- error identifiers: spec section 7 and ours, each with its one HTTP status --------------

ERROR_CODES: dict[str, tuple[int, str]] = {
    # reading the request
    "invalid_json": (400, "the body is not a JSON object"),
    "invalid_headers": (400, "x-wallet-address or x-svc-budget-spender is not a 0x address"),
    "payload_too_large": (413, "the body is over 64 KiB"),
    "unsupported_media_type": (415, "the body is not sent as application/json"),
    "missing_field": (422, "a required field is missing (`field` names it)"),
    "invalid_field": (422, "a field has the wrong type or is too long (`field` names it)"),
    "invalid_idempotency_key": (422, f"`idempotencyKey` is not a non-empty string of at most "
                                     f"{MAX_KEY_LENGTH} characters"),
    "invalid_amount": (422, "an amount is not a whole number of atomic units, is zero, or is "
                            "outside the product's bounds"),
    # backend API keys (spec 5.1)
    "valid_api_key_required": (401, "no `zpk_` key was sent, or it is unknown or revoked"),
    "api_key_scope_missing": (403, "the key lacks the scope named in `scope`"),
    "developer_session_required": (401, "console host lookups: sent a key or CLI grant "
                                   "instead of the console session"),
    "not_found": (404, "no such object for this API key (another app's objects are not "
                       "disclosed)"),
    # apps, products, orders
    "app_not_found": (404, "no app with this slug"),
    "product_not_found": (404, "no active product with this slug or id"),
    "ORDER_REQUIRED": (409, "the product is priced per order (`dynamic_order`): create an "
                            "order first"),
    "ORDER_ALREADY_PAID": (409, "the order was already paid"),
    "IDEMPOTENCY_KEY_REUSED": (409, "the `idempotencyKey` was used with a different request"),
    # return URLs, permits, wallet proofs, handoffs
    "return_url_not_allowed": (422, "the return URL is not one of the forms of spec 5.5 "
                                    "(`returnUrl` echoes it)"),
    "return_url_runtime_inactive": (422, "the return URL is on the runtime host, which is not "
                                         "served yet (runtime verified and domain approved)"),
    "invalid_permit": (422, "the permit object is malformed, or its value is wrong for the "
                            "operation"),
    "invalid_address": (422, "an address field is not a 0x address"),
    "invalid_permit_signature": (422, "the permit was not signed by its owner for this token "
                                      "and spender"),
    "permit_expired": (422, "the permit's deadline has passed"),
    "permit_nonce_stale": (409, "the permit's nonce is not past every one recorded for the wallet"),
    "permit_already_used": (409, "this permit is already recorded: a permit counts once; "
                                  "the current budget is reached again with an owner "
                                  "proof"),
    "owner_proof_used": (409, "this owner proof was already exchanged: it counts once; "
                              "sign a new one"),
    "invalid_owner_proof": (422, "the wallet-ownership proof is malformed or not signed by "
                                 "its owner for this app, return URL and budget"),
    "owner_proof_expired": (422, f"the wallet-ownership proof is older than "
                                 f"{OWNER_PROOF_MAX_AGE_SECONDS} s"),
    "needs_budget": (402, "the wallet has no active budget left (`budgetState`); sign a new "
                          "permit"),
    "no_active_budget": (404, "the wallet has no active budget to revoke"),
    "handoff_invalid": (422, "the account handoff token is not valid, or belongs to another "
                             "app"),
    "handoff_expired": (410, "the account handoff token expired"),
    # codes (spec 3.6, 7)
    "AUTHORIZATION_CODE_INVALID": (401, "unknown summary or payment code"),
    "AUTHORIZATION_CODE_EXPIRED": (410, "the summary or payment code expired"),
    "AUTHORIZATION_CODE_CONSUMED": (409, "the single-use payment code was already used; "
                                         "stable, unrecoverable for the saved intent"),
    "AUTHORIZATION_CODE_INTENT_MISMATCH": (409, "the code does not match the requested "
                                                "product, order, idempotency key or "
                                                "`developerUserId`, or the order is for "
                                                "another `developerUserId`"),
    "ACCOUNT_CONNECTION_MISMATCH": (409, "the code's account connection differs from "
                                         "`accountConnectionId` (or, for trusted charges, no "
                                         "active connection has that id, or it was made for "
                                         "another `merchantUserId` than the "
                                         "`developerUserId` or the order's user)"),
    "PAYMENT_CODE_ORIGIN_REQUIRED": (403, "the payment-code exchange was called without an "
                                          "`Origin` header"),
    "PAYMENT_CODE_ORIGIN_MISMATCH": (403, "the `Origin` is not the summary code's audience"),
    "WALLET_MISMATCH": (403, "x-wallet-address is not the owner of the code's budget"),
    "SPENDER_MISMATCH": (403, "x-svc-budget-spender is not the budget's spender"),
    # the app as a recipient (spec 7: product route rejects the app)
    "APP_UNAVAILABLE": (403, "the app is not active or its kill switch is on"),
    "APP_PAY_TO_INVALID": (403, "the app has no valid `pay_to` address"),
    "RECIPIENT_NOT_ALLOWLISTED": (403, "the app's `pay_to` is not on the spender contract's "
                                       "allowlist"),
    # budgets (spec 7: payment fails after successful authorization)
    "AUTHORIZATION_REVOKED": (402, "the user revoked the budget (`budgetState` "
                                   "`budget_revoked`)"),
    "AUTHORIZATION_EXPIRED": (402, "the budget expired (`budgetState` `budget_expired`)"),
    "INSUFFICIENT_BUDGET": (402, "the remaining budget does not cover the amount "
                                 "(`budgetState` `needs_budget`, `remaining`)"),
    # trusted-server charges (spec 4.4)
    "TRUSTED_CHARGE_NOT_ALLOWED": (403, "the product does not allow trusted-server charges"),
    "TRUSTED_CHARGE_OVER_LIMIT": (403, "the amount is over the product's "
                                       "`riskPolicy.trustedServerCharge.maxAmountAtomic`"),
    "rate_limited": (429, "too many of these requests from this client; `retryAfter` (and "
                          "the `Retry-After` header) says how many seconds to wait"),
    "internal_error": (500, "the service failed; retry later"),
    "service_unavailable": (503, "the database is unreachable for now (a restart or "
                                 "failover); nothing changed: retry after `Retry-After` "
                                 "seconds with the same idempotency key"),
}

BODY_ERRORS = ("invalid_json", "payload_too_large", "unsupported_media_type", "missing_field",
               "invalid_field")
KEY_ERRORS = ("valid_api_key_required", "api_key_scope_missing")
RECIPIENT_ERRORS = ("APP_UNAVAILABLE", "APP_PAY_TO_INVALID", "RECIPIENT_NOT_ALLOWLISTED")
BUDGET_ERRORS = ("AUTHORIZATION_REVOKED", "AUTHORIZATION_EXPIRED", "INSUFFICIENT_BUDGET")

# -- reusable schema pieces ------------------------------------------------------------------


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


STR: dict[str, Any] = {"type": "string"}
NULLABLE_STR: dict[str, Any] = {"type": ["string", "null"]}
DATE_TIME: dict[str, Any] = {"type": "string", "format": "date-time"}
NULLABLE_DATE_TIME: dict[str, Any] = {"type": ["string", "null"], "format": "date-time"}


def _str(max_length: int, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_length, **extra}


def _obj(required: Iterable[str], **props: Any) -> dict[str, Any]:
    return {"type": "object", "required": list(required), "properties": props}


def _enum(values: Iterable[str]) -> dict[str, Any]:
    return {"type": "string", "enum": [str(v) for v in values]}


RETENTION_DAYS = RETENTION.days
IDEMPOTENCY_NOTE = (
    f"Idempotency: the answer to an `idempotencyKey` is stored per app for {RETENTION_DAYS} "
    "days. The same key with the same request returns the stored status and body again; the "
    "same key with a different request answers `IDEMPOTENCY_KEY_REUSED` (409). Stored "
    "answers are kept per endpoint (product route, orders, trusted charges). Never reuse a "
    "key for a new purchase: deliveries and orders also keep their key unique per app "
    f"beyond the {RETENTION_DAYS} days, so a late reuse, or one key used on both the "
    "product route and `/api/charges`, is refused (`IDEMPOTENCY_KEY_REUSED`).")
PAY_RETRY_NOTE = (
    "Retries: for the product route the same request means the same purchase, not the same "
    "code. A client that lost the answer holds a consumed code, so it retries under the same "
    "key with a freshly exchanged one; the service compares what that code binds (product, "
    "order, the `developerUserId` the delivery goes to, the budget's wallet and spender, the "
    "account connection) and answers the stored result, reading the new code without "
    "consuming it. A code for another purchase under the key is refused "
    "(`IDEMPOTENCY_KEY_REUSED`, or the code's own mismatch error), an unknown one is "
    "`AUTHORIZATION_CODE_INVALID`; nothing is charged either way.")
PROOF_NOTE = (
    f"`paymentProof` (scheme `{PROOF_SCHEME}`): `signature` is `\"sha256=\" + "
    "hex(HMAC-SHA256(key, canonical_json(payload)))`, where `key` is the very `zpk_` secret "
    "that made this call and `canonical_json` sorts object keys, uses no whitespace "
    "(`,` and `:` separators) and writes non-ASCII characters as UTF-8. Recompute it over "
    "`payload` and compare in constant time; the SDK's `verify_payment_proof` does this. "
    "Grant from the proof alone only when `payload.deliveryStatus` is `delivered`: a "
    "`settled_first` product's proof says `awaiting_settlement` (grant on `payment.delivered` "
    "or a delivery lookup that says `delivered`). The proof states the delivery at issue "
    "time: a replay returns it unchanged after settlement.")
CORS_NOTE = (
    "CORS: never `*`. The response is readable by a browser only when its `Origin` equals "
    "the code's audience (the origin of the return URL the summary was issued for); a "
    "readable response exposes `Retry-After` (`Access-Control-Expose-Headers`).")

COMPONENT_SCHEMAS: dict[str, Any] = {
    "Address": {"type": "string", "pattern": "^0x[0-9a-fA-F]{40}$",
                "description": "An EVM address. Wallets and spenders are answered in lower "
                               "case."},
    "AtomicAmount": {"type": "string", "pattern": "^[0-9]+$",
                     "description": "USDC atomic units (6 decimals) as an integer string: "
                                    "10000 is 0.01 USDC."},
    "AtomicAmountInput": {"type": ["string", "integer"], "pattern": "^[0-9]{1,30}$",
                          "minimum": 0,
                          "description": "Atomic units as an integer string (preferred) or a "
                                         "JSON integer."},
    "ChargeId": {"type": "string", "pattern": "^0x[0-9a-f]{64}$",
                 "description": "`bytes32(uint256(seq))` of the ledger sequence number: the "
                                "on-chain charge id of BudgetSpenderV2."},
    "Uint256Input": {"type": ["string", "integer"], "pattern": "^[0-9]+$", "minimum": 0},
    "AppRef": _obj(["id", "slug", "name"], id=STR, slug=STR, name=STR),
    "Permit": {
        **_obj(["owner", "value", "nonce", "deadline", "signature"],
               owner=ref("Address"), value=ref("Uint256Input"), nonce=ref("Uint256Input"),
               deadline={**ref("Uint256Input"), "description": "unix seconds"},
               signature={"type": "string", "pattern": "^0x[0-9a-fA-F]{130}$"}),
        "description": "A USDC EIP-2612 `Permit(owner, spender, value, nonce, deadline)` "
                       "signed with `eth_signTypedData_v4`; the spender is BudgetSpenderV2 and "
                       "nothing else enters the typed data (spec 1.10).",
    },
    "OwnerProof": {
        **_obj(["owner", "authorizationId", "issuedAt", "signature"],
               owner=ref("Address"), authorizationId=STR, issuedAt=DATE_TIME,
               signature={"type": "string", "pattern": "^0x[0-9a-fA-F]{130}$"}),
        "description": "A gas-free `personal_sign` of the text `Confirm this wallet for a "
                       "payment budget.\\nApp: <slug>\\nReturn: <returnUrl>\\nSpender: "
                       "<spender, lower case>\\nAuthorization: <authorizationId>\\nIssued: "
                       f"<issuedAt>`, at most {OWNER_PROOF_MAX_AGE_SECONDS} s old; it reuses "
                       "the wallet's current budget instead of a new permit.",
    },
    "ReturnCodeRequest": {
        **_obj(["app", "returnUrl"], app=_str(63, description="app slug"),
               returnUrl=_str(2048, description="one of the forms of spec 5.5"),
               handoff=_str(2000, description="the `handoff` token of an account-handoff "
                                              "portal URL: binds the developer's account to "
                                              "this wallet"),
               permit=ref("Permit"), ownerProof=ref("OwnerProof")),
        "description": "Exactly one of `permit` (a new budget) and `ownerProof` (the wallet's "
                       "current budget).",
    },
    "AuthorizationSummary": {
        **_obj(["authorizationCode", "authorizationId", "ownerWallet", "spender",
                "remaining", "status", "expiresAt", "budgetExpiresAt", "app",
                "accountConnectionId"],
               authorizationCode={"type": "string", "pattern": "^sum_",
                                  "description": "the short-lived summary code"},
               authorizationId=STR, ownerWallet=ref("Address"), spender=ref("Address"),
               remaining={**ref("AtomicAmount"),
                          "description": "ledger remaining budget; never the ERC-20 "
                                         "allowance"},
               status=_enum(AuthorizationStatus),
               expiresAt={**DATE_TIME, "description": "when the summary code expires"},
               budgetExpiresAt={**DATE_TIME, "description": "the permit deadline"},
               app=ref("AppRef"),
               accountConnectionId={**NULLABLE_STR,
                                    "description": "set in the account-binding flow"}),
        "description": "Spec 2.7. Never contains API keys, secrets or private user data.",
    },
    "ReturnCodeResponse": _obj(
        ["code", "redirectUrl", "expiresAt", "summary"],
        code={"type": "string", "pattern": "^sum_"},
        redirectUrl={"type": "string", "description": "`returnUrl` with `code` added to its "
                                                      "query"},
        expiresAt=DATE_TIME, summary=ref("AuthorizationSummary")),
    "PaymentCodeRequest": _obj(
        ["authorizationCode", "paymentUrl"],
        authorizationCode=_str(200, description="the summary code"),
        paymentUrl=_str(2048, description="`{base_url}/api/pay/<app-slug>/<product-slug>` of "
                                          "an active product of the summary's app"),
        orderId=_str(48, description="binds the payment code to this unpaid order"),
        accountConnectionId=_str(48, description="must equal the summary's connection"),
        developerUserId=_str(200, description="used by the product route when it is sent "
                                              "none"),
        idempotencyKey=_str(200, description="when set, the product route must be called "
                                             "with this key")),
    "PaymentCodeResponse": _obj(["authorization"], authorization=_obj(
        ["authorizationCode", "ownerWallet", "spender", "expiresAt", "paymentUrl",
         "accountConnectionId"],
        authorizationCode={"type": "string", "pattern": "^pay_",
                           "description": "the product-bound, single-use payment code"},
        ownerWallet=ref("Address"), spender=ref("Address"), expiresAt=DATE_TIME,
        paymentUrl=STR, accountConnectionId=NULLABLE_STR)),
    "RevokeRequest": _obj(["permit"], permit={**ref("Permit"),
                                              "description": "`Permit(value=0)` with the "
                                                             "token's next nonce"}),
    "RevokeResponse": _obj(["authorization"], authorization=_obj(
        ["id", "status", "ownerWallet", "remaining"], id=STR, status={"const": "revoked"},
        ownerWallet=ref("Address"), remaining={"const": "0"})),
    "PayRequest": _obj(
        ["authorizationCode", "idempotencyKey"],
        authorizationCode=_str(200, description="the payment code (not a summary code)"),
        idempotencyKey=_str(MAX_KEY_LENGTH, minLength=1,
                            description="replay-safe, e.g. `<prefix>:<product-slug>:<uuid>`"),
        developerUserId=_str(200), orderId=_str(48, description="the order the code was "
                                                                "issued for (`zord_`)"),
        accountConnectionId=_str(48), source=_str(64, description="a label; not stored")),
    "ChargeResult": _obj(
        ["status", "chargeId", "deliveryId", "idempotencyKey", "amountAtomic",
         "settlementStatus", "orderId", "remaining", "eventId"],
        status={**_enum(DeliveryStatus), "description": "`delivered` for optimistic "
                "products; `awaiting_settlement` for settled_first ones"},
        chargeId=ref("ChargeId"), deliveryId={"type": "string", "pattern": "^ztdlv_"},
        idempotencyKey={"type": "string", "pattern": f"^{DELIVERY_KEY_PREFIX}",
                        "description": f"the delivery's key: `{DELIVERY_KEY_PREFIX}` + the "
                                       "request's idempotencyKey"},
        amountAtomic=ref("AtomicAmount"), settlementStatus=_enum(SettlementStatus),
        orderId=NULLABLE_STR, remaining={**ref("AtomicAmount"),
                                         "description": "budget left after this charge"},
        eventId={"type": ["string", "null"], "pattern": "^zevt_",
                 "description": "the `payment.delivered` event; null for settled_first "
                                "products, whose event follows settlement"}),
    "PaymentProof": _obj(
        ["scheme", "payload", "signature"], scheme={"const": PROOF_SCHEME},
        payload=_obj(["chargeId", "deliveryId", "idempotencyKey", "appId", "productId",
                      "amountAtomic", "ownerWallet", "accountConnectionId",
                      "developerUserId", "issuedAt"],
                     chargeId=ref("ChargeId"), deliveryId=STR, idempotencyKey=STR, appId=STR,
                     productId=STR, amountAtomic=ref("AtomicAmount"),
                     ownerWallet=ref("Address"), accountConnectionId=STR,
                     developerUserId=NULLABLE_STR, issuedAt=DATE_TIME,
                     riskMode={**_enum(RiskMode), "description": "the product's risk mode"},
                     deliveryStatus={**_enum(DeliveryStatus), "description": (
                         "the delivery's status when the proof was issued: grant from the "
                         "proof alone only when `delivered`. Both fields are in every proof "
                         "issued now; a replay of a charge made before they were added "
                         "returns its stored proof without them: look the delivery up.")}),
        signature={"type": "string", "pattern": "^sha256=[0-9a-f]{64}$"}),
    "TrustedChargeRequest": _obj(
        ["productId", "accountConnectionId", "idempotencyKey"],
        productId=_str(48), accountConnectionId=_str(48, description="an active connection "
                                                                     "of this app"),
        idempotencyKey=_str(MAX_KEY_LENGTH, minLength=1),
        developerUserId=_str(200, description="the user the delivery goes to: the "
                                              "`merchantUserId` the connection was made "
                                              "for; required unless `orderId` is sent (the "
                                              "order's user is taken then)"),
        orderId=_str(48)),
    "OrderRequest": {
        **_obj(["productId", "developerUserId", "idempotencyKey"], productId=_str(48),
               developerUserId=_str(200, minLength=1),
               idempotencyKey=_str(MAX_KEY_LENGTH, minLength=1),
               amountAtomic=ref("AtomicAmountInput")),
        "description": "`amountAtomic` is required for `dynamic_order` products (between the "
                       "product's minimum and maximum); for fixed-price products omit it or "
                       "send the price.",
    },
    "Order": _obj(
        ["id", "status", "amountAtomic", "productId", "developerUserId", "idempotencyKey",
         "chargeId", "createdAt", "paidAt"],
        id={"type": "string", "pattern": "^zord_"}, status=_enum(OrderStatus),
        amountAtomic=ref("AtomicAmount"), productId=STR, developerUserId=STR,
        idempotencyKey=STR, chargeId={"anyOf": [ref("ChargeId"), {"type": "null"}]},
        createdAt=DATE_TIME, paidAt=NULLABLE_DATE_TIME),
    "OrderCreated": _obj(["order", "product"], order=ref("Order"), product=_obj(
        ["id", "slug", "paymentUrl"], id=STR, slug=STR,
        paymentUrl={"type": "string", "description": "the product route URL"})),
    "OrderLookup": _obj(["order"], order=ref("Order")),
    "Delivery": {
        **_obj(["deliveryId", "idempotencyKey", "status", "fulfilled", "chargeId", "appId",
                "productId", "itemId", "developerUserId", "walletAddress", "paymentMode",
                "network", "amount", "payTo", "settlementStatus", "settlementTxHash",
                "deliveredAt"],
               deliveryId={"type": "string", "pattern": "^ztdlv_"}, idempotencyKey=STR,
               status=_enum(DeliveryStatus), fulfilled={"type": "boolean"},
               chargeId=ref("ChargeId"), appId=STR, productId=STR,
               itemId={"type": "string", "description": "the product's sku"},
               developerUserId=NULLABLE_STR, walletAddress=ref("Address"),
               paymentMode={"const": PAYMENT_MODE}, network=STR, amount=ref("AtomicAmount"),
               payTo=ref("Address"), settlementStatus=_enum(SettlementStatus),
               settlementTxHash=NULLABLE_STR, deliveredAt=NULLABLE_DATE_TIME,
               orderId={"type": "string", "description": "present only when the payment was "
                                                         "linked to an order"}),
        "description": "The fulfillment record; the same object as the webhook event's "
                       "`delivery`.",
    },
    "DeliveryLookup": _obj(["delivery"], delivery=ref("Delivery")),
    "Receipt": _obj(
        ["chargeId", "amountAtomic", "currency", "network", "simulated", "payTo",
         "ownerWallet", "budgetSpender", "settlementStatus", "settlementTxHash", "createdAt",
         "settledAt", "deliveryId", "orderId", "paymentPath", "app", "product"],
        chargeId=ref("ChargeId"), amountAtomic=ref("AtomicAmount"),
        currency={"const": CURRENCY}, network=STR, simulated={"type": "boolean"},
        payTo=ref("Address"), ownerWallet=ref("Address"), budgetSpender=ref("Address"),
        settlementStatus=_enum(SettlementStatus), settlementTxHash=NULLABLE_STR,
        createdAt=DATE_TIME, settledAt=NULLABLE_DATE_TIME, deliveryId=STR,
        orderId=NULLABLE_STR, paymentPath=_enum(["product_route", "trusted_server"]),
        app=ref("AppRef"), product=_obj(["id", "slug", "name"], id=STR, slug=STR, name=STR)),
    "ReceiptLookup": _obj(["receipt"], receipt=ref("Receipt")),
    "HandoffRequest": _obj(
        ["appSlug", "merchantUserId", "returnUrl"], appSlug=_str(63),
        merchantUserId=_str(200, pattern=r"\S", description="stable developer-side account "
                            "id, not blank; stored only as an HMAC scoped to the app"),
        gameAccountLabel=_str(120, description="display name only"),
        emailHint=_str(254, description="accepted and checked, not stored or used"),
        walletHint=_str(42, pattern="^0x[0-9a-fA-F]{40}$",
                        description="an address; passed on to the portal URL"),
        returnUrl=_str(2048, description="one of the forms of spec 5.5")),
    "Connection": _obj(
        ["id", "status", "ownerWallet", "budgetRemaining", "boundAt"],
        id=STR, status=_enum(ConnectionStatus), ownerWallet=ref("Address"),
        budgetRemaining=ref("AtomicAmount"), boundAt=DATE_TIME),
    "HandoffResponse": {
        **_obj(["status", "handoff", "connection"],
               status=_enum(["ready", "needs_connection", "needs_budget"]),
               handoff=_obj(["portalUrl", "expiresAt", "appSlug", "gameAccountLabel"],
                            portalUrl={"type": "string",
                                       "description": "`{portal_url}/authorize?app=…&return="
                                                      "…&handoff=<token>` (+ `renew=1` when "
                                                      "a connection exists but is not ready)"},
                            expiresAt=DATE_TIME, appSlug=STR, gameAccountLabel=STR),
               connection={"anyOf": [ref("Connection"), {"type": "null"}]},
               authorization=_obj(["ownerWallet", "spender", "authorizationCode",
                                   "accountConnectionId"],
                                  ownerWallet=ref("Address"), spender=ref("Address"),
                                  authorizationCode={"type": "string", "pattern": "^sum_",
                                                     "description": "a summary code: exchange "
                                                     "it at the payment-code endpoint"},
                                  accountConnectionId=STR)),
        "description": "`authorization` is present only when `status` is `ready`. Only the "
                       "client-safe projection (status, handoff, connection) may reach a "
                       "browser UI; `authorization.authorizationCode` must not reach general "
                       "UI state, analytics, logs or caches.",
    },
}
COMPONENT_SCHEMAS["TrustedChargeResult"] = {
    **COMPONENT_SCHEMAS["ChargeResult"],
    "required": [*COMPONENT_SCHEMAS["ChargeResult"]["required"], "paymentProof"],
    "properties": {**COMPONENT_SCHEMAS["ChargeResult"]["properties"],
                   "paymentProof": ref("PaymentProof")},
}


def webhook_event_schema() -> dict[str, Any]:
    """The published webhook event schema as an OpenAPI component (no ``$schema``/``$id``)."""
    schema = load_schema(WEBHOOK_EVENT)
    schema.pop("$schema", None)
    schema.pop("$id", None)
    return schema


SECURITY_SCHEMES: dict[str, Any] = {
    "apiKey": {"type": "http", "scheme": "bearer", "bearerFormat": "zpk_…",
               "description": "A backend API key: `Authorization: Bearer zpk_…`. Server-side "
                              "only. The operation's security requirement names the key "
                              "scope it needs; keys with an empty (legacy) scope list pass "
                              "every scope check."},
    "apiKeyHeader": {"type": "apiKey", "in": "header", "name": "x-svc-secret-key",
                     "description": "The same backend API key in `x-svc-secret-key: zpk_…`."},
}


def _keyed(scope: str) -> list[dict[str, list[str]]]:
    return [{"apiKey": [scope]}, {"apiKeyHeader": [scope]}]


# -- operations ---------------------------------------------------------------------------


def error_responses(codes: Iterable[str],
                    statuses: dict[str, int] | None = None) -> dict[str, Any]:
    """One response per status; its schema is the `Error` envelope with `code` enumerated."""
    by_status: dict[int, list[str]] = {}
    for code in [*codes, "internal_error", "service_unavailable"]:
        status = (statuses or {}).get(code, ERROR_CODES[code][0])
        if code not in by_status.setdefault(status, []):
            by_status[status].append(code)
    responses: dict[str, Any] = {}
    for status in sorted(by_status):
        listed = by_status[status]
        responses[str(status)] = {
            "description": "; ".join(f"`{c}`: {ERROR_CODES[c][1]}" for c in listed),
            "content": {"application/json": {"schema": {
                "allOf": [{"$ref": "#/components/schemas/Error"}],
                "properties": {"code": {"enum": listed}}}}},
        }
    return responses


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _body(name: str) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": ref(name)}}}


def _header(name: str, description: str, *, required: bool = True,
            schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "in": "header", "required": required, "description": description,
            "schema": schema or STR}


def _path(name: str, description: str, pattern: str | None = None) -> dict[str, Any]:
    schema = {"type": "string", **({"pattern": pattern} if pattern else {})}
    return {"name": name, "in": "path", "required": True, "description": description,
            "schema": schema}


def _op(op_id: str, summary: str, description: str, *, ok: str, ok_schema: str,
        errors: Iterable[str], body: str | None = None, scope: str | None = None,
        parameters: list[dict[str, Any]] | None = None,
        statuses: dict[str, int] | None = None, tag: str = "payments") -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": op_id, "tags": [tag], "summary": summary, "description": description,
        "security": _keyed(scope) if scope else [],
        "responses": {ok: _json(ref(ok_schema), "success"),
                      **error_responses(errors, statuses)},
    }
    if body is not None:
        op["requestBody"] = _body(body)
    if parameters:
        op["parameters"] = parameters
    return op


def _preflight(op_id: str) -> dict[str, Any]:
    return {
        "operationId": op_id, "tags": ["cors"], "summary": "CORS preflight.",
        "description": "Admits any origin that could be a summary audience: the portal, an "
                       "app runtime host (`<slug>.{apps_domain}`), or "
                       "`http://localhost|127.0.0.1:<port>`. The actual request is then "
                       "checked against its code's exact audience. Allowed methods "
                       f"`GET, POST`, headers `{ALLOWED_HEADERS}`, cached 600 s.",
        "security": [],
        "parameters": [_header("Origin", "the page's origin"),
                       _header("Access-Control-Request-Method", "the method to follow",
                               required=False)],
        "responses": {
            "204": {"description": "allowed", "headers": {
                "Access-Control-Allow-Origin": {"schema": STR,
                                                "description": "the request's Origin"},
                "Access-Control-Allow-Methods": {"schema": {"const": "GET, POST"}},
                "Access-Control-Allow-Headers": {"schema": {"const": ALLOWED_HEADERS}},
                "Access-Control-Max-Age": {"schema": {"const": "600"}}}},
            "403": {"description": "no Origin, or not a plausible audience; empty body"},
        },
    }


def ledger_paths() -> dict[str, Any]:
    options = _preflight
    a = "/api/authorizations"
    return {
        f"{a}/return-code": {
            "post": _op(
                "createReturnCode", "Issue a summary code after the user signed (portal).",
                "Called by the portal after the user signed either a new budget `permit` "
                "(EIP-2612, verified off-chain before any database work; the relayer sends it "
                "on chain later) or an `ownerProof` for the wallet's current active budget. "
                "The return URL is checked against spec 5.5 and its origin becomes the "
                "summary code's audience. With a `handoff` token the developer's account is "
                "bound to the wallet (an account connection). A new permit replaces the "
                "wallet's active budget; charges of the old budget that have not settled yet "
                "count against the new one. The summary code lives "
                "`SVCSRV_SUMMARY_CODE_TTL_SECONDS` (default 600 s) and may be exchanged more "
                "than once while it lives. Answers `cache-control: no-store`; readable "
                "cross-origin by the portal only.",
                ok="200", ok_schema="ReturnCodeResponse", body="ReturnCodeRequest",
                errors=[*BODY_ERRORS, "app_not_found", "return_url_not_allowed",
                        "return_url_runtime_inactive", "invalid_permit", "invalid_address",
                        "invalid_permit_signature", "permit_expired", "permit_nonce_stale",
                        "permit_already_used",
                        "invalid_owner_proof", "owner_proof_expired", "owner_proof_used",
                        "needs_budget",
                        "handoff_invalid", "handoff_expired", "rate_limited"],
                tag="authorizations"),
            "options": options("preflightReturnCode"),
        },
        f"{a}/summary": {
            "get": _op(
                "getAuthorizationSummary", "Read the summary behind a summary code.",
                f"Spec 2.7. {CORS_NOTE} Answers `cache-control: no-store`.",
                ok="200", ok_schema="AuthorizationSummary",
                parameters=[{"name": "code", "in": "query", "required": True,
                             "schema": STR, "description": "the summary code"}],
                errors=["AUTHORIZATION_CODE_INVALID", "AUTHORIZATION_CODE_EXPIRED"],
                tag="authorizations"),
            "options": options("preflightSummary"),
        },
        f"{a}/payment-code": {
            "post": _op(
                "createPaymentCode", "Exchange a summary code for a payment code (browser).",
                "An app-origin browser boundary (spec 4.6): a request without `Origin`, or "
                "from an origin other than the summary's audience, is refused before the "
                "code is looked up. The payment code is bound to the product of "
                "`paymentUrl` (and to `orderId`, `idempotencyKey`, the summary's account "
                "connection when given), single-use, and lives "
                "`SVCSRV_PAYMENT_CODE_TTL_SECONDS` (default 300 s). The order must be "
                "of the same product and unpaid, or paid under the `idempotencyKey` sent "
                "(a retry after a lost answer: that code can only find the payment's "
                f"stored answer again). {CORS_NOTE} Answers "
                "`cache-control: no-store`.",
                ok="200", ok_schema="PaymentCodeResponse", body="PaymentCodeRequest",
                parameters=[_header("Origin", "the page that received the summary code")],
                errors=["PAYMENT_CODE_ORIGIN_REQUIRED", "PAYMENT_CODE_ORIGIN_MISMATCH",
                        *BODY_ERRORS, "AUTHORIZATION_CODE_INVALID",
                        "AUTHORIZATION_CODE_EXPIRED", "AUTHORIZATION_CODE_INTENT_MISMATCH",
                        "ACCOUNT_CONNECTION_MISMATCH"],
                tag="authorizations"),
            "options": options("preflightPaymentCode"),
        },
        f"{a}/revoke": {
            "post": _op(
                "revokeAuthorization", "Revoke the wallet's budget with a signed "
                "Permit(value=0).",
                "The ledger side of a revoke (spec 1 item 9): the permit is verified, the "
                "wallet's active budget is marked `revoked` (remaining 0) at once, and the "
                "signed permit is queued for the relayer. The nonce must be newer than the "
                "budget's permit nonce. Readable cross-origin by the portal only.",
                ok="200", ok_schema="RevokeResponse", body="RevokeRequest",
                errors=[*BODY_ERRORS, "invalid_permit", "invalid_address",
                        "invalid_permit_signature", "no_active_budget",
                        "permit_nonce_stale"],
                tag="authorizations"),
            "options": options("preflightRevoke"),
        },
        "/api/pay/{app}/{product}": {
            "parameters": [_path("app", "app slug"), _path("product", "product slug")],
            "post": _op(
                "payProduct", "Pay for a product with a payment code (product route).",
                "Spec 4.1. In one database transaction: the payment code is consumed (a "
                "conditional UPDATE: single use under any concurrency), the amount is "
                "reserved from the budget (a conditional UPDATE: `spent + amount <= value`), "
                "and a charge (settlement status `queued`), a delivery, and for optimistic "
                "products a `payment.delivered` event with its outbox attempt are written. "
                "settled_first products get their delivery in `awaiting_settlement` and no "
                "event yet. The response does not wait for any webhook. The amount is the "
                "product price, or the order's amount when `orderId` is sent. A rejected "
                "payment leaves the code unused. "
                f"{IDEMPOTENCY_NOTE} {PAY_RETRY_NOTE} {CORS_NOTE}",
                ok="201", ok_schema="ChargeResult", body="PayRequest",
                parameters=[
                    _header("x-wallet-address", "the summary's `ownerWallet`",
                            schema=ref("Address")),
                    _header("x-svc-budget-spender", "the summary's `spender`",
                            schema=ref("Address")),
                ],
                errors=["invalid_headers", *BODY_ERRORS, "invalid_idempotency_key",
                        "app_not_found", "product_not_found", "IDEMPOTENCY_KEY_REUSED",
                        "AUTHORIZATION_CODE_INVALID", "AUTHORIZATION_CODE_EXPIRED",
                        "AUTHORIZATION_CODE_CONSUMED", "AUTHORIZATION_CODE_INTENT_MISMATCH",
                        "ACCOUNT_CONNECTION_MISMATCH", "WALLET_MISMATCH", "SPENDER_MISMATCH",
                        "ORDER_ALREADY_PAID", "ORDER_REQUIRED", *RECIPIENT_ERRORS,
                        "invalid_amount", *BUDGET_ERRORS]),
            "options": options("preflightPay"),
        },
        "/api/orders": {
            "post": _op(
                "createOrder", "Create an order (backend).",
                "Spec 4.2. The order starts `created` and becomes `paid` with the charge "
                f"that pays it. {IDEMPOTENCY_NOTE}",
                ok="201", ok_schema="OrderCreated", body="OrderRequest",
                scope="orders:create",
                errors=[*KEY_ERRORS, *BODY_ERRORS, "invalid_idempotency_key",
                        "invalid_amount", "not_found", "product_not_found",
                        "IDEMPOTENCY_KEY_REUSED"]),
        },
        "/api/orders/{order_id}": {
            "parameters": [_path("order_id", "`zord_…`")],
            "get": _op("getOrder", "Look up an order (backend).", "Spec 4.2.",
                       ok="200", ok_schema="OrderLookup", scope="orders:read",
                       errors=[*KEY_ERRORS, "not_found"]),
        },
        "/api/deliveries": {
            "get": _op("findDeliveryByKey", "Find a delivery by its idempotency key (backend).",
                       "Ours, beyond spec 4.3's lookups: the delivery made under the "
                       "`idempotencyKey` the developer sent to the product route or "
                       "`/api/charges` (the delivery carries it as "
                       f"`{DELIVERY_KEY_PREFIX}` + key; send the key without it: that "
                       "form of a charged key is refused, `invalid_idempotency_key`). For a "
                       "backend whose answer was lost and whose webhook is late: it has "
                       "only the key, and must know whether it was charged before telling "
                       "a user to buy again. A charge and its delivery are written in one "
                       "transaction, so `not_found` means nothing has been charged under "
                       "the key in that app; its envelope echoes `idempotencyKey`, which "
                       "tells it apart from a 404 of a server without this route. An app "
                       "key searches its own app (`app` may name it); an organization key "
                       "must name the app (`missing_field` otherwise). Another app, or one "
                       "the key cannot see, is `not_found` like an unknown key. On the "
                       "console host the same path answers a developer signed in to the "
                       "console for the apps of their organization, `app` required.",
                       ok="200", ok_schema="DeliveryLookup", scope="deliveries:read",
                       parameters=[
                           {"name": "idempotencyKey", "in": "query", "required": True,
                            "schema": _str(MAX_KEY_LENGTH, minLength=1),
                            "description": "the key as the developer sent it"},
                           {"name": "app", "in": "query", "required": False,
                            "schema": _str(64, minLength=1),
                            "description": "the app's id (`zapp_…`) or slug; required "
                                           "for organization keys and console sessions"}],
                       errors=[*KEY_ERRORS, "invalid_idempotency_key", "missing_field",
                               "invalid_field", "not_found", "developer_session_required"]),
        },
        "/api/deliveries/{delivery_id}": {
            "parameters": [_path("delivery_id", "`ztdlv_…`")],
            "get": _op("getDelivery", "Trusted delivery lookup (backend).",
                       "Spec 4.3: the record to fulfil from when a webhook is missing. "
                       "Needs a backend key; there is no public lookup by delivery id."
                       " On the console host the same path answers a developer signed in "
                       "to the console "
                       "(session cookie, no key; spec 5.1 item 5) for the apps of their "
                       "organization; a CLI grant is refused there "
                       "(`developer_session_required`).",
                       ok="200", ok_schema="DeliveryLookup", scope="deliveries:read",
                       errors=[*KEY_ERRORS, "not_found", "developer_session_required"]),
        },
        "/api/receipts/{charge_id}": {
            "parameters": [_path("charge_id", "the `chargeId` (0x + 64 hex)")],
            "get": _op("getReceipt", "Look up a receipt by charge id (backend).",
                       "Spec 4.3. Needs a backend key."
                       " On the console host the same path answers a developer signed in "
                       "to the console "
                       "(session cookie, no key; spec 5.1 item 5) for the apps of their "
                       "organization; a CLI grant is refused there "
                       "(`developer_session_required`).",
                       ok="200", ok_schema="ReceiptLookup", scope="receipts:read",
                       errors=[*KEY_ERRORS, "not_found", "developer_session_required"]),
        },
        "/api/account-handoffs": {
            "post": _op(
                "createAccountHandoff", "Start or refresh an account handoff (backend).",
                "Spec 4.5, 3.5. `ready`: an active connection whose wallet has active "
                "remaining budget; `authorization` carries a fresh summary code for it "
                "(audience: the return URL's origin). `needs_budget`: a connection without "
                "budget. `needs_connection`: none yet. `handoff.portalUrl` carries a signed, "
                "stateless handoff token (HMAC with the server secret) that lives "
                "`SVCSRV_HANDOFF_TTL_SECONDS` (default 900 s). `merchantUserId` is stored "
                "only as an HMAC scoped to the app. Answers `cache-control: no-store`.",
                ok="200", ok_schema="HandoffResponse", body="HandoffRequest",
                scope="connections:create",
                errors=[*KEY_ERRORS, *BODY_ERRORS, "app_not_found", "not_found",
                        "return_url_not_allowed", "return_url_runtime_inactive"]),
        },
        "/api/charges": {
            "post": _op(
                "createTrustedCharge", "Trusted-server charge (backend).",
                "Spec 4.4. Charges the connected wallet's budget without a browser step, in "
                "the same one-transaction unit of work as the product route. The product "
                "must allow it (`riskPolicy.trustedServerCharge.enabled`, and the amount "
                "at most its `maxAmountAtomic`). A `developerUserId` (or the order's user) "
                "must be the `merchantUserId` the connection's account handoff was made "
                "for, else `ACCOUNT_CONNECTION_MISMATCH` and nothing is charged; without "
                "either, `missing_field` (422) and nothing is charged (the service keeps "
                "only a hash of the connection's user, so it cannot supply it). The "
                "delivery, its events and the proof carry that user. The response carries "
                "a `paymentProof`, "
                f"always. {PROOF_NOTE} {IDEMPOTENCY_NOTE} Answers `cache-control: "
                "no-store`.",
                ok="201", ok_schema="TrustedChargeResult", body="TrustedChargeRequest",
                scope="charges:create",
                errors=[*KEY_ERRORS, *BODY_ERRORS, "invalid_idempotency_key", "not_found",
                        "IDEMPOTENCY_KEY_REUSED", "ACCOUNT_CONNECTION_MISMATCH",
                        "AUTHORIZATION_CODE_INTENT_MISMATCH", "ORDER_ALREADY_PAID",
                        "ORDER_REQUIRED", "TRUSTED_CHARGE_NOT_ALLOWED",
                        "TRUSTED_CHARGE_OVER_LIMIT", "needs_budget", *RECIPIENT_ERRORS,
                        "invalid_amount", *BUDGET_ERRORS]),
        },
    }


def ledger_webhooks() -> dict[str, Any]:
    """OpenAPI 3.1 ``webhooks``: what the service POSTs to the developer's endpoint."""
    def event(summary: str) -> dict[str, Any]:
        return {"post": {
            "summary": summary, "tags": ["webhooks"],
            "description": "Body: the webhook event (`{docs_url}/webhook-event.schema.json`). "
                           "Verify `x-svc-signature` over the raw body before fulfilling; "
                           "answer 2xx only after idempotent fulfillment keyed by "
                           "`delivery.deliveryId` / `delivery.idempotencyKey`.",
            "parameters": [
                _header("x-svc-event", "the event type"),
                _header("x-svc-delivery-id", "`ztdlv_…`"),
                _header("x-svc-idempotency-key", "the delivery's idempotency key"),
                _header("x-svc-timestamp", "ISO 8601"),
                _header("x-svc-signature", "`sha256=<digest>`"),
            ],
            "requestBody": _body("WebhookEvent"),
            "responses": {"2XX": {"description": "fulfilled (or already fulfilled)"},
                          "5XX": {"description": "temporarily unavailable; retried"}},
        }}
    return {
        "payment.delivered": event("The fulfillment signal within the product's risk mode."),
        "payment.settled": event("Chain settlement confirmed."),
    }
