"""OpenAPI 3.1 description of the portal host's JSON endpoints (served by ``portal/``).

They live on ``{portal_url}``, not the API host, so every path item carries its own
``servers``. They exist for the portal's own pages: no CORS (the public balance read
excepted), writes need the portal ``Origin`` and an ``x-csrf-token`` (``portal/csrf.py``).
``tests/portal/test_portal_openapi.py`` checks each route is described and real answers
match these schemas.
"""

from __future__ import annotations

from typing import Any

from payments.portal.proofs import CHALLENGE_TTL, SESSION_TTL

STR = {"type": "string"}
ATOMIC = {"type": "string", "pattern": "^[0-9]+$", "description": "USDC atomic units"}
ADDRESS = {"type": "string", "pattern": "^0x[0-9a-f]{40}$", "description": "lower-case"}
TIME = {"type": "string", "format": "date-time"}

ERRORS: dict[str, tuple[int, str]] = {
    "invalid_json": (400, "the body is not a JSON object"),
    "unsupported_media_type": (415, "the body is not application/json"),
    "payload_too_large": (413, "the body is over 64 KiB"),
    "csrf_failed": (403, "no portal Origin, or a missing, expired or wrong x-csrf-token"),
    "missing_field": (422, "a required field is missing"),
    "invalid_field": (422, "a field or query parameter is malformed (`field` names it)"),
    "invalid_address": (422, "not a 0x address"),
    "app_not_found": (404, "no app with this slug"),
    "return_url_not_allowed": (422, "the return URL is not one of the forms of spec 5.5"),
    "return_url_runtime_inactive": (422, "a runtime return URL before the runtime is active"),
    "needs_budget": (402, "the wallet has no active budget"),
    "handoff_invalid": (422, "the account handoff token is not valid, or belongs to another "
                             "app"),
    "handoff_expired": (410, "the account handoff token expired"),
    "invalid_permit": (422, "the permit is malformed"),
    "invalid_permit_signature": (422, "the permit was not signed by its owner for our token "
                                      "and spender"),
    "permit_expired": (422, "the permit's deadline has passed"),
    "permit_nonce_stale": (409, "the permit's nonce is not past every one recorded for the wallet"),
    "permit_already_used": (409, "this permit is already recorded: a permit counts once; "
                                  "the current budget is reached again with an owner "
                                  "proof"),
    "wallet_proof_invalid": (422, "the challenge or its signature is not valid"),
    "wallet_proof_expired": (422, f"the challenge is older than "
                                  f"{int(CHALLENGE_TTL.total_seconds())} s"),
    "wallet_proof_used": (409, "this signed challenge already opened a session"),
    "wallet_proof_required": (401, "no live wallet session (cookie `__Host-svc_portal_wallet`)"),
    "connection_not_found": (404, "no active connection with this id for the proven wallet"),
    "rate_limited": (429, "too many of these requests from this client; `retryAfter` (and "
                          "the `Retry-After` header) says how many seconds to wait"),
}
BODY = ["invalid_json", "unsupported_media_type", "payload_too_large", "csrf_failed"]

BUDGET = {
    "type": "object", "additionalProperties": False,
    "required": ["authorizationId", "state", "valueAtomic", "remaining", "spender",
                 "expiresAt", "revokedAt"],
    "properties": {
        "authorizationId": {"type": "string", "pattern": "^zauth_"},
        "state": {"enum": ["active", "needs_budget", "budget_expired", "budget_revoked"]},
        "valueAtomic": ATOMIC,
        "remaining": {**ATOMIC, "description": "the ledger's remaining budget (value - spent "
                                               "of an active, unexpired budget); never the "
                                               "ERC-20 allowance"},
        "spender": STR, "expiresAt": TIME, "revokedAt": {"type": ["string", "null"]},
    },
}
TYPED_DATA = {
    "type": "object", "required": ["types", "primaryType", "domain", "message"],
    "description": "EIP-712 typed data for `eth_signTypedData_v4`: the token's EIP-2612 "
                   "`Permit(owner, spender, value, nonce, deadline)` with BudgetSpenderV2 "
                   "as spender, nothing else (spec 1.10). Numbers are decimal strings.",
    "properties": {
        "primaryType": {"const": "Permit"},
        "types": {"type": "object", "required": ["EIP712Domain", "Permit"],
                  "additionalProperties": False,
                  "properties": {"EIP712Domain": {"type": "array"},
                                 "Permit": {"type": "array", "minItems": 5, "maxItems": 5}}},
        "domain": {"type": "object", "required": ["name", "version", "chainId",
                                                  "verifyingContract"]},
        "message": {"type": "object", "additionalProperties": False,
                    "required": ["owner", "spender", "value", "nonce", "deadline"],
                    "properties": {"owner": ADDRESS, "spender": STR, "value": ATOMIC,
                                   "nonce": ATOMIC, "deadline": ATOMIC}},
    },
}
ACCOUNT = {
    "type": "object", "additionalProperties": False,
    "required": ["wallet", "csrfToken", "verifiedUntil", "budget", "connections", "spend"],
    "properties": {
        "wallet": ADDRESS,
        "csrfToken": {**STR, "description": "send as x-csrf-token on unlink and forget"},
        "verifiedUntil": TIME,
        "budget": {"oneOf": [{"$ref": "#/components/schemas/PortalBudget"}, {"type": "null"}]},
        "connections": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["id", "status", "app", "gameAccountLabel", "boundAt"],
            "properties": {"id": {"type": "string", "pattern": "^zconn_"},
                           "status": {"const": "active"},
                           "app": {"$ref": "#/components/schemas/PortalAppRef"},
                           "gameAccountLabel": STR, "boundAt": TIME}}},
        "spend": {"type": "array", "description": "the latest 50 charges, newest first",
                  "items": {
                      "type": "object", "additionalProperties": False,
                      "required": ["chargeId", "createdAt", "app", "product", "amountAtomic",
                                   "settlementStatus"],
                      "properties": {"chargeId": {"type": "string", "pattern": "^0x"},
                                     "createdAt": TIME,
                                     "app": {"$ref": "#/components/schemas/PortalAppRef"},
                                     "product": {"$ref": "#/components/schemas/PortalAppRef"},
                                     "amountAtomic": ATOMIC,
                                     "settlementStatus": {"enum": ["queued", "settling",
                                                                   "settled", "failed"]}}}},
    },
}
COMPONENT_SCHEMAS: dict[str, Any] = {
    "PortalBudget": BUDGET, "PortalTypedData": TYPED_DATA, "PortalAccount": ACCOUNT,
    "PortalAppRef": {"type": "object", "required": ["slug", "name"],
                     "additionalProperties": False,
                     "properties": {"slug": STR, "name": STR}},
    "PortalWallet": {
        "type": "object", "additionalProperties": False,
        "required": ["address", "permitNonce", "budget", "usdcBalance"],
        "properties": {
            "address": ADDRESS,
            "permitNonce": {**ATOMIC, "description": "the nonce the next permit must carry: "
                                                     "the token's `nonces(owner)` or one "
                                                     "past every nonce the ledger recorded, "
                                                     "whichever is higher"},
            "budget": {"oneOf": [{"$ref": "#/components/schemas/PortalBudget"},
                                 {"type": "null"}],
                       "description": "the active budget, else the latest revoked or expired "
                                      "one"},
            "usdcBalance": {"type": ["string", "null"], "description": "token balance; null "
                                                                       "when the chain is "
                                                                       "unreachable"}}},
}


def _errors(codes: list[str]) -> dict[str, Any]:
    by_status: dict[int, list[str]] = {}
    for code in codes:
        by_status.setdefault(ERRORS[code][0], []).append(code)
    return {str(status): {
        "description": "; ".join(f"`{c}`: {ERRORS[c][1]}" for c in names),
        "content": {"application/json": {"schema": {
            "allOf": [{"$ref": "#/components/schemas/Error"},
                      {"properties": {"code": {"enum": names}}}]}}}}
        for status, names in sorted(by_status.items())}


def _json(schema: dict[str, Any], description: str = "success") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _query(name: str, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": True, "description": description,
            "schema": schema or STR}


def _body(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "required": required, "properties": properties}}}}


CSRF_HEADER = {"name": "x-csrf-token", "in": "header", "required": True, "schema": STR,
               "description": "the page's token (`csrfToken` of its page data); after the "
                              "wallet proof, the session's `csrfToken` where stated"}
ORIGIN = "Requires `Origin: {portal_url}` and `x-csrf-token`."


def _op(op_id: str, summary: str, description: str, ok: dict[str, Any], errors: list[str],
        *, parameters: list[dict[str, Any]] | None = None,
        body: dict[str, Any] | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": op_id, "tags": ["portal"], "summary": summary,
                          "description": description, "security": [],
                          "responses": {"200": ok, **_errors(errors)}}
    if parameters:
        op["parameters"] = parameters
    if body:
        op["requestBody"] = body
    return op


def portal_paths(portal_url: str, *, dev: bool = True) -> dict[str, Any]:
    """Path items for ``{portal_url}``; the dev wallet's only when ``dev``."""
    servers = [{"url": portal_url, "description": "the portal host"}]
    p = "/api/portal"
    address = _query("address", "a 0x wallet address")
    permit = {"type": "object", "description": "a signed EIP-2612 Permit",
              "required": ["owner", "value", "nonce", "deadline", "signature"]}
    paths: dict[str, Any] = {
        f"{p}/wallet": {"get": _op(
            "getPortalWallet", "A wallet's budget, next permit nonce and USDC balance.",
            "For the authorize and account pages. No CORS.",
            _json({"$ref": "#/components/schemas/PortalWallet"}),
            ["invalid_address", "rate_limited"], parameters=[address])},
        f"{p}/permit": {"get": _op(
            "getPortalPermit", "The exact typed data of a budget (or revoke) permit.",
            "`value` 0 is a revoke (`Permit(value=0)`); otherwise 1 to 10,000 USDC and a "
            "`deadline` 10 minutes to 400 days ahead. No CORS.",
            _json({"type": "object", "required": ["typedData"], "additionalProperties": False,
                   "properties": {"typedData": {"$ref": "#/components/schemas/"
                                                        "PortalTypedData"}}}),
            ["invalid_address", "invalid_field", "rate_limited"],
            parameters=[_query("owner", "the signing wallet"),
                        _query("value", "atomic units", ATOMIC),
                        _query("deadline", "unix seconds", ATOMIC)])},
        f"{p}/owner-proof": {"get": _op(
            "getPortalOwnerProof", "The text of a gas-free owner proof for the current budget.",
            "The authorize page's shortcut for a wallet with an active budget (skipped with "
            "`renew=1` or `forceAuthorize=1`): the wallet `personal_sign`s `text` and the page "
            "sends `ownerProof` to `POST {base_url}/api/authorizations/return-code`. With "
            "`handoff` (an account handoff's token, sent to `return-code` with the proof) the "
            "text names the game account it links, and `return-code` verifies it so.",
            _json({"type": "object", "additionalProperties": False,
                   "required": ["authorizationId", "issuedAt", "text"],
                   "properties": {"authorizationId": STR, "issuedAt": TIME, "text": STR}}),
            ["invalid_address", "app_not_found", "return_url_not_allowed",
             "return_url_runtime_inactive", "needs_budget", "handoff_invalid",
             "handoff_expired"],
            parameters=[_query("owner", "the wallet"), _query("app", "app slug"),
                        _query("returnUrl", "the authorize page's return URL"),
                        {**_query("handoff", "the authorize page's account handoff token, "
                                  "when it has one"), "required": False}])},
        f"{p}/budget": {"post": _op(
            "renewPortalBudget", "Renew the global budget with a new signed permit.",
            f"The account page's renew. A new permit replaces the wallet's budget for every "
            f"app; unsettled charges of the old budget count against it. {ORIGIN}",
            _json({"type": "object", "required": ["budget"], "additionalProperties": False,
                   "properties": {"budget": {"$ref": "#/components/schemas/PortalBudget"}}}),
            [*BODY, "invalid_permit", "invalid_address", "invalid_permit_signature",
             "permit_expired", "permit_nonce_stale", "permit_already_used"],
            parameters=[CSRF_HEADER], body=_body({"permit": permit}, ["permit"]))},
        f"{p}/wallet-proof/challenge": {"post": _op(
            "createWalletProofChallenge", "A wallet-ownership challenge to `personal_sign`.",
            f"Gas-free and not a permit; valid {int(CHALLENGE_TTL.total_seconds())} s. "
            f"{ORIGIN}",
            _json({"type": "object", "additionalProperties": False,
                   "required": ["challenge", "message", "expiresAt"],
                   "properties": {"challenge": STR, "message": STR, "expiresAt": TIME}}),
            [*BODY, "invalid_address"], parameters=[CSRF_HEADER],
            body=_body({"address": ADDRESS}, ["address"]))},
        f"{p}/wallet-proof": {"post": _op(
            "proveWallet", "Open a wallet session with the signed challenge.",
            f"Sets `__Host-svc_portal_wallet` (`svc_portal_wallet` in dev over http; "
            f"HttpOnly, SameSite=Strict, host-only, no Max-Age: it "
            f"ends with the browser session; the server ends it after "
            f"{int(SESSION_TTL.total_seconds() // 3600)} h). One session per challenge. "
            f"{ORIGIN}",
            _json({"$ref": "#/components/schemas/PortalAccount"}),
            [*BODY, "missing_field", "invalid_field", "wallet_proof_invalid",
             "wallet_proof_expired", "wallet_proof_used", "rate_limited"],
            parameters=[CSRF_HEADER],
            body=_body({"challenge": STR, "signature": STR}, ["challenge", "signature"]))},
        f"{p}/wallet-proof/forget": {"post": _op(
            "forgetWalletProof", "End the wallet session.",
            "Needs the session's `csrfToken` when a session is live; clears the cookie.",
            _json({"type": "object", "properties": {"forgotten": {"const": True}}}),
            [*BODY], parameters=[CSRF_HEADER])},
        f"{p}/account": {"get": _op(
            "getPortalAccount", "Connected apps, spend records and budget of the proven wallet.",
            "Needs the `__Host-svc_portal_wallet` cookie.",
            _json({"$ref": "#/components/schemas/PortalAccount"}), ["wallet_proof_required"])},
        f"{p}/connections/{{connection_id}}/unlink": {"post": _op(
            "unlinkConnection", "Unlink one of the proven wallet's app accounts.",
            "Needs the cookie and the session's `csrfToken`. The app must hand off again "
            "(`needs_connection`) before it can use the budget.",
            _json({"$ref": "#/components/schemas/PortalAccount"}),
            [*BODY, "wallet_proof_required", "connection_not_found"],
            parameters=[CSRF_HEADER, {"name": "connection_id", "in": "path", "required": True,
                                      "schema": STR}])},
        "/api/public/usdc-balance": {"get": _op(
            "getUsdcBalance", "A wallet's USDC balance (public chain data).",
            "For the runtime wallet card; `Access-Control-Allow-Origin: *` (its refusals too, "
            "with `Retry-After` exposed), no cookies. Never a budget: the card shows the "
            "budget from the summary's `remaining`.",
            _json({"type": "object", "additionalProperties": False,
                   "required": ["address", "balanceAtomic"],
                   "properties": {"address": ADDRESS,
                                  "balanceAtomic": {"type": ["string", "null"]}}}),
            ["invalid_address", "rate_limited"], parameters=[address])},
    }
    if dev:
        paths[f"{p}/dev-wallet/account"] = {"post": _op(
            "devWalletAccount", "Dev mode only: the dev wallet's address.",
            f"Not mounted outside dev. One test key per dev server; funds the address from "
            f"the in-process TestUSDC faucet. {ORIGIN}",
            _json({"type": "object", "additionalProperties": False,
                   "required": ["address", "chainId"],
                   "properties": {"address": STR, "chainId": STR}}),
            [*BODY], parameters=[CSRF_HEADER], body=_body({}, []))}
        paths[f"{p}/dev-wallet/sign"] = {"post": _op(
            "devWalletSign", "Dev mode only: sign as the dev wallet.",
            f"Signs only our token's Permit (`eth_signTypedData_v4`) and `personal_sign` texts. "
            f"{ORIGIN}",
            _json({"type": "object", "additionalProperties": False, "required": ["result"],
                   "properties": {"result": STR}}),
            [*BODY, "invalid_field", "invalid_address"], parameters=[CSRF_HEADER],
            body=_body({"method": {"enum": ["eth_signTypedData_v4", "personal_sign"]},
                        "params": {"type": "array"}}, ["method", "params"]))}
    for item in paths.values():
        item["servers"] = servers
    return paths
