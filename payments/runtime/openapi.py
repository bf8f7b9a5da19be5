"""OpenAPI paths and schemas of the runtime operations (spec 3.1, 2.8)."""

from __future__ import annotations

from typing import Any

SECURITY: list[dict[str, list[str]]] = [{"cliGrant": []}, {"consoleSession": []}]
STR = {"type": "string"}
NULL_STR = {"type": ["string", "null"]}
TIME = {"type": ["string", "null"], "format": "date-time"}
APP_REF = {"name": "app", "in": "path", "required": True, "schema": STR,
           "description": "app id (zapp_...) or slug"}

CHECK = {
    "type": "object", "required": ["id", "rule", "passed", "seen", "expected", "fix"],
    "properties": {
        "id": {"type": "string", "description": "stable check id: origin, manifest_fetch, "
               "manifest_json, manifest_object, appId, slug, payTo, webhookPath, "
               "paymentSubmittedPath, appPath, entryPath, runtimeOrigin, webhook_probe, "
               "payment_submitted_probe"},
        "rule": {"type": "string", "description": "what was checked, in words"},
        "passed": {"type": "boolean"},
        "seen": {**NULL_STR, "description": "the value seen (shortened to 200 characters); "
                 "null when absent"},
        "expected": {**NULL_STR, "description": "the value expected"},
        "fix": {"type": "string", "description": "how to fix a failed check; empty when "
                "passed"},
    },
}

RUNTIME = {
    "type": "object",
    "properties": {
        "app": STR, "appId": STR,
        "status": {"enum": ["not_configured", "pending_verification", "active", "disabled"]},
        "origin": NULL_STR, "appPath": STR, "entryPath": STR,
        "url": {"type": "string", "description": "https://<app-slug>.{apps_domain}"},
        "domainRequestStatus": {"enum": ["not_requested", "pending_manual_dns", "approved",
                                         "rejected"]},
        "hostedReviewStatus": {"enum": ["not_requested", "pending", "approved", "rejected"]},
        "killSwitch": {"type": "boolean"},
        "checkedAt": TIME, "verifiedAt": TIME, "domainRequestedAt": TIME,
        "lastReport": {"oneOf": [{"type": "null"}, {
            "type": "object", "properties": {
                "passed": {"type": "boolean"},
                "checks": {"type": "array", "items": {"$ref": "#/components/schemas/"
                                                              "RuntimeCheck"}}}}]},
    },
    "additionalProperties": True,
}

COMPONENT_SCHEMAS = {"RuntimeCheck": CHECK, "Runtime": RUNTIME}


def _op(summary: str, description: str, *, scope: str, codes: dict[int, list[str]],
        body: dict[str, Any] | None = None, response: dict[str, Any] | None = None,
        ) -> dict[str, Any]:
    responses: dict[str, Any] = {"200": {"description": "success", "content": {
        "application/json": {"schema": response or {"type": "object", "properties": {
            "runtime": {"$ref": "#/components/schemas/Runtime"}}}}}}}
    for status, listed in sorted(codes.items()):
        # The `Error` envelope with the codes this operation answers under this status.
        responses[str(status)] = {
            "description": ", ".join(f"`{c}`" for c in listed),
            "content": {"application/json": {"schema": {
                "allOf": [{"$ref": "#/components/schemas/Error"}],
                "properties": {"code": {"enum": listed}}}}}}
    op: dict[str, Any] = {
        "summary": summary,
        "description": f"{description} CLI grants need the scope `{scope}` (else "
                       "`developer_cli_scope_missing` naming it); a console session may act "
                       "on every app of its organization.",
        "security": SECURITY, "parameters": [APP_REF], "responses": responses,
    }
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": body}}}
    return op


AUTH_CODES = {401: ["developer_auth_required", "developer_grant_expired"],
              403: ["developer_cli_scope_missing", "developer_cli_app_mismatch", "csrf_failed"],
              404: ["app_not_found"], 429: ["rate_limited"], 500: ["internal_error"]}
RUNTIME_ERRORS: dict[int, list[str]] = {
    400: ["invalid_json"], 413: ["payload_too_large"], 415: ["unsupported_media_type"],
    409: ["runtime_not_configured", "runtime_state_conflict", "runtime_changed",
          "runtime_not_active"],
    422: ["runtime_origin_invalid", "invalid_field", "missing_field",
          "runtime_verification_failed"]}


def _codes(*names: str) -> dict[int, list[str]]:
    found = {status: list(codes) for status, codes in AUTH_CODES.items()}
    for status, codes in RUNTIME_ERRORS.items():
        listed = [c for c in codes if c in names]
        if listed:
            found.setdefault(status, []).extend(listed)
    return found


def runtime_paths() -> dict[str, Any]:
    p = "/api/developer/apps/{app}/runtime"
    changed = {"type": "object", "properties": {
        "runtime": {"$ref": "#/components/schemas/Runtime"}, "changed": {"type": "boolean"}}}
    return {
        p: {"get": _op(
            "The runtime: status, origin, paths, domain request and the last verification "
            "report.", "Read-only.", scope="apps:read", codes=AUTH_CODES)},
        f"{p}/configure": {"post": _op(
            "Save the runtime origin and paths; the runtime waits for verification.",
            "The origin must be a developer-owned public HTTPS origin (scheme://host[:port]): "
            "not a service host, not the apps proxy domain, no localhost, loopback or private "
            "address (those only with the local-development setting). Status becomes "
            "`pending_verification` unless nothing changed on an active runtime.",
            scope="runtime:write", response=changed,
            body={"type": "object", "required": ["origin"], "properties": {
                "origin": {"type": "string", "examples": ["https://game.example.com"]},
                "appPath": {"type": "string", "default": "/",
                            "description": "concrete path, never null"},
                "entryPath": {"type": "string", "default": "/",
                              "description": "concrete path, never null"}}},
            codes=_codes("invalid_json", "payload_too_large", "unsupported_media_type",
                         "runtime_origin_invalid", "invalid_field", "missing_field",
                         "runtime_state_conflict"))},
        f"{p}/verify": {"post": _op(
            "Verify the runtime: fetch /.well-known/svc.json from the saved origin, check "
            "every rule of the manifest and probe the webhook and payment-submitted routes.",
            "The manifest is fetched over a connection pinned to the checked address of the "
            "origin (5 s per request, 64 KiB, redirects only within the origin). Passing "
            "makes the runtime `active`; failing answers 422 `runtime_verification_failed` "
            "with `checks` (each with seen, expected and fix) and `runtime`, and takes an "
            "active runtime back to `pending_verification`. The report is stored either way.",
            scope="runtime:write",
            response={"type": "object", "properties": {
                "runtime": {"$ref": "#/components/schemas/Runtime"},
                "report": {"type": "object", "properties": {
                    "passed": {"const": True}, "checks": {"type": "array", "items": {
                        "$ref": "#/components/schemas/RuntimeCheck"}}}}}},
            codes=_codes("runtime_not_configured", "runtime_state_conflict", "runtime_changed",
                         "runtime_verification_failed"))},
        f"{p}/disable": {"post": _op(
            "Disable the runtime: the runtime host shows the inactive page.",
            "Verifying again turns it back on.", scope="runtime:write", response=changed,
            codes=_codes("runtime_not_configured", "runtime_state_conflict"))},
        f"{p}/domain-request": {"post": _op(
            "Request the public hostname https://<app-slug>.{apps_domain} (after "
            "activation).",
            "Sets `domainRequestStatus` to `pending_manual_dns` and notifies operators "
            "internally (`runtime_domain_requested`, never delivered to developers); the "
            "hostname is served once an operator approved it. A request already pending or "
            "approved is answered with `requested: false`.",
            scope="runtime:write",
            response={"type": "object", "properties": {
                "runtime": {"$ref": "#/components/schemas/Runtime"},
                "hostname": STR, "requested": {"type": "boolean"}}},
            codes=_codes("runtime_not_active"))},
    }
