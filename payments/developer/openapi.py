"""OpenAPI paths of the developer API."""

from __future__ import annotations

from typing import Any

from payments.apps import DISTRIBUTION_TARGETS
from payments.developer.grants import CLI_SCOPES

GRANT: list[dict[str, list[str]]] = [{"cliGrant": []}, {"consoleSession": []}]
SESSION_ONLY: list[dict[str, list[str]]] = [{"consoleSession": []}]
ERR = {"$ref": "#/components/responses/Error"}


def _op(summary: str, *, scope: str | None = None, secured: bool = True, status: str = "200",
        body: dict[str, Any] | None = None,
        security: list[dict[str, list[str]]] = GRANT) -> dict[str, Any]:
    description = summary
    if scope:
        description += f" CLI grants need the scope `{scope}`; a console session may act on " \
                       "every app of its organization."
    op: dict[str, Any] = {"summary": summary, "description": description, "responses": {
        status: {"description": "success"}, "400": ERR, "401": ERR, "403": ERR, "404": ERR,
        "422": ERR, "429": ERR}}
    if secured:
        op["security"] = security
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": body}}}
    return op


def _obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "additionalProperties": True}


STR = {"type": "string"}
STRS = {"type": "array", "items": STR}
ENTRY_URL = {"type": "string", "description": "blank, or the app's own public https:// URL "
             "(http://localhost in dev); else entry_url_invalid"}
TARGETS = {"type": "array", "uniqueItems": True, "items": {"enum": list(DISTRIBUTION_TARGETS)}}
APP_REF = {"name": "app", "in": "path", "required": True, "schema": STR,
           "description": "app id (zapp_...) or slug"}
KEY_IDEMPOTENCY = ("With an `idempotencyKey` (or the `Idempotency-Key` header; at most 200 "
                   "characters), a repeat within 30 days in the organization makes no second "
                   "key: the same request answers 409 `key_already_created` with `keyId` and "
                   "`key` (masked preview), never the secret; a different one answers 409 "
                   "`IDEMPOTENCY_KEY_REUSED`. The 201, the 409 `key_already_created` and "
                   "every other answer of the key routes naming a key are "
                   "`cache-control: no-store`.")
IDEMPOTENCY_FIELD = {**STR, "maxLength": 200, "description": "optional replay-safe key"}
IDEMPOTENCY_HEADER = {"name": "Idempotency-Key", "in": "header", "required": False,
                      "schema": {**STR, "maxLength": 200},
                      "description": "the same as the body's idempotencyKey"}


def _create_key_op(op: dict[str, Any]) -> dict[str, Any]:
    """A create-key operation with its idempotency key: the header and the 409s."""
    op["description"] += " " + KEY_IDEMPOTENCY
    op["parameters"] = [IDEMPOTENCY_HEADER]
    op["responses"]["409"] = ERR
    return op


# Mounted on the console host only: a console session's, never reachable with a grant on
# the API host, so the document names the console as their server.
CONSOLE_ONLY_PATHS = ("/api/developer/cli/approve", "/api/developer/keys",
                      "/api/developer/keys/{key}", "/api/developer/keys/{key}/revoke")


def developer_paths(console_url: str | None = None) -> dict[str, Any]:
    paths = _developer_paths()
    if console_url is not None:
        for path in CONSOLE_ONLY_PATHS:
            paths[path]["servers"] = [{"url": console_url, "description": "the console host"}]
    return paths


def _developer_paths() -> dict[str, Any]:
    p = "/api/developer"
    product_body = _obj(template=STR, slug=STR, sku=STR, name=STR, priceAtomic=STR,
                        riskMode={"enum": ["optimistic", "settled_first"]},
                        pricing={"enum": ["fixed", "dynamic_order"]}, minAmountAtomic=STR,
                        maxAmountAtomic=STR, riskPolicy={"type": "object"},
                        fulfillmentAdapter={"const": "webhook"},
                        fulfillmentConfig={"type": "object"})
    return {
        f"{p}/me": {"get": _op("Who is calling: developer, organizations, and the grant.")},
        f"{p}/templates": {"get": _op("Default product templates (spec 2.3).", secured=False)},
        f"{p}/apps": {
            "get": _op("List the apps the caller may read.", scope="apps:read"),
            "post": _op("Create an app (console session only; operators are notified).",
                        status="201", body=_obj(name=STR, slug=STR, type=STR, headline=STR,
                                                payTo=STR, tags=STRS)),
        },
        f"{p}/apps/{{app}}": {
            "parameters": [APP_REF],
            "get": _op("One app.", scope="apps:read"),
            "patch": _op("Change an app; a new payTo moves payToStatus to testing.",
                         scope="apps:write", body=_obj(name=STR, headline=STR,
                                                       entryUrl=ENTRY_URL, type=STR, payTo=STR,
                                                       tags=STRS, distributionTargets=TARGETS)),
        },
        f"{p}/apps/{{app}}/products": {
            "parameters": [APP_REF],
            "get": _op("List products.", scope="apps:read"),
            "post": _op("Create a product from a template and/or fields.",
                        scope="products:write", status="201", body=product_body),
        },
        f"{p}/apps/{{app}}/products/{{product}}": {
            "parameters": [APP_REF, {"name": "product", "in": "path", "required": True,
                                     "schema": STR}],
            "patch": _op("Change a product. The answer carries `warnings`: a new slug adds "
                         "`product_slug_changed` (the payment route moves; the old one "
                         "answers 404), as config apply does.", scope="products:write",
                         body=product_body),
        },
        f"{p}/apps/{{app}}/keys": {
            "parameters": [APP_REF],
            "get": _op("List the app's own keys (ownership `app`, masked previews only); "
                       "organization keys are listed at /api/developer/keys.",
                       scope="apps:read"),
            "post": _create_key_op(_op(
                "Create a zpk_ key of this app; the secret is in this response only.",
                scope="keys:create", status="201",
                body=_obj(label=STR, scopes=STRS, environment=STR,
                          idempotencyKey=IDEMPOTENCY_FIELD))),
        },
        f"{p}/apps/{{app}}/keys/{{key}}": {
            "parameters": [APP_REF, {"name": "key", "in": "path", "required": True,
                                     "schema": STR}],
            "patch": _op("Change a key's label and/or scopes (an explicit, non-empty list); "
                         "the secret is unchanged and never returned.", scope="keys:create",
                         body=_obj(label=STR, scopes=STRS)),
        },
        f"{p}/apps/{{app}}/keys/{{key}}/revoke": {
            "parameters": [APP_REF, {"name": "key", "in": "path", "required": True,
                                     "schema": STR}],
            "post": _op("Revoke an API key.", scope="keys:create"),
        },
        **_organization_key_paths(p),
        f"{p}/cli/auth-requests": {"post": _op(
            "Start a CLI sign-in (browser or device flow); returns deviceCode and userCode.",
            secured=False, status="201", body=_obj(app=STR, scopes={
                **STRS, "description": "spec 5.3's scopes: " + ", ".join(CLI_SCOPES)
                + " (default apps:read); any other name is 422 invalid_scope. The config "
                "API asks for these too: apps:read to plan, and the write scope of each "
                "kind of change to apply."}, ttlSeconds={"type": "integer"}))},
        f"{p}/cli/token": {"post": _op(
            "Poll with the deviceCode: authorization_pending until approved, then the grant "
            "token (once).", secured=False, body=_obj(deviceCode=STR))},
        f"{p}/cli/approve": {"post": _op(
            "Console host, console session only: approve or deny a pending CLI sign-in by "
            "its user code.", body=_obj(userCode=STR, decision={"enum": ["approve", "deny"]},
                                        app=STR))},
        f"{p}/cli/grant": {
            "get": _op("The calling CLI grant."),
            "delete": _op("Revoke the calling CLI grant."),
        },
    }


def _organization_key_paths(p: str) -> dict[str, Any]:
    def session_op(summary: str, **kwargs: Any) -> dict[str, Any]:
        return _op(f"Console host, console session only: {summary} A CLI grant, whatever its "
                   "scopes, is refused with `developer_session_required` (403): it is scoped "
                   "to one app, and an organization key reaches every app.",
                   security=SESSION_ONLY, **kwargs)
    key = {"name": "key", "in": "path", "required": True, "schema": STR}
    return {
        f"{p}/keys": {
            "get": session_op("list the organization keys (ownership `organization`, "
                              "masked previews only) of the caller's organizations."),
            "post": _create_key_op(session_op(
                "create an organization key, which may act on every app of its organization; "
                "the secret is in this response only.", status="201",
                body=_obj(label=STR, scopes=STRS, environment=STR,
                          idempotencyKey=IDEMPOTENCY_FIELD, organizationId={
                              **STR, "description": "needed only by a member of several "
                              "organizations; another organization is "
                              "organization_not_found"}))),
        },
        f"{p}/keys/{{key}}": {
            "parameters": [key],
            "patch": session_op("change an organization key's label and/or scopes; the "
                                "secret is unchanged and never returned.",
                                body=_obj(label=STR, scopes=STRS)),
        },
        f"{p}/keys/{{key}}/revoke": {
            "parameters": [key],
            "post": session_op("revoke an organization key at once."),
        },
    }


SECURITY_SCHEMES = {
    "cliGrant": {"type": "http", "scheme": "bearer",
                 "description": "A CLI grant token (zcli_...), scoped to one app, expiring."},
    "consoleSession": {"type": "apiKey", "in": "cookie", "name": "__Host-svc_console",
                       "description": "Console host only; mutations need x-csrf-token. "
                                      "`svc_console` in dev over http."},
}
