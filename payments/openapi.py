"""The OpenAPI 3.1 description served at ``{docs_url}/openapi.json``.

It grows with every endpoint; a test checks each route of the API host is described.
"""

from __future__ import annotations

from typing import Any

from payments.config import openapi as config
from payments.developer.openapi import SECURITY_SCHEMES, developer_paths
from payments.ledger import openapi as ledger
from payments.portal import openapi as portal
from payments.runtime import openapi as runtime
from payments.webhooks import openapi as webhooks

ERROR = {
    "type": "object", "required": ["code", "message"],
    "properties": {
        "code": {"type": "string", "description": "a stable identifier (spec section 7 or "
                                                  "ours)"},
        "message": {"type": "string", "description": "a human sentence"},
        "field": {"type": "string", "description": "the request field at fault"},
        "scope": {"type": "string", "description": "the missing API key scope"},
        "budgetState": {"enum": ["needs_budget", "budget_expired", "budget_revoked"],
                        "description": "what the runtime should show: each needs a renewal "
                                       "through the portal"},
        "remaining": {"type": "string", "description": "remaining budget, atomic units"},
        "returnUrl": {"type": "string", "description": "the refused return URL"},
        "idempotencyKey": {"type": "string", "description": "a lookup by key: the key no "
                                                            "delivery of the app has"},
    },
    "additionalProperties": True,
}


def openapi_document(base_url: str, portal_url: str | None = None, *,
                     dev: bool = False, console_url: str | None = None) -> dict[str, Any]:
    """With ``portal_url``, also the portal host's JSON endpoints (their own ``servers``);
    the dev wallet's only when ``dev``. With ``console_url``, the routes only the console
    host has name it as their server."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "Small-payment settlement service", "version": "1.2.0",
                 "description": "Errors use the envelope `Error`: a stable `code` and a "
                                "human `message`, plus optional fields such as `scope`. "
                                "Each operation lists the codes it can answer under their "
                                "HTTP status. Amounts are USDC atomic units (6 decimals) "
                                "as integer strings. See also `docs/payments.md`."},
        "servers": [{"url": base_url}],
        "components": {
            "schemas": {"Error": ERROR, **ledger.COMPONENT_SCHEMAS, **runtime.COMPONENT_SCHEMAS,
                        **webhooks.COMPONENT_SCHEMAS, **portal.COMPONENT_SCHEMAS,
                        **config.COMPONENT_SCHEMAS,
                        "WebhookEvent": ledger.webhook_event_schema()},
            "responses": {"Error": {"description": "an error in the envelope", "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}},
            "securitySchemes": {**SECURITY_SCHEMES, **ledger.SECURITY_SCHEMES},
        },
        "paths": {
            "/healthz": {"get": {
                "summary": "Liveness: the process answers.",
                "responses": {"200": {"description": "alive", "content": {"application/json": {
                    "schema": {"type": "object", "properties": {"status": {"const": "ok"}}}}}}},
            }},
            "/statusz": {"get": {
                "summary": "Readiness of the database, Redis and the settlement chain.",
                "responses": {
                    "200": {"description": "every required dependency is ready"},
                    "503": {"description": "a required dependency is down"},
                },
            }},
            **developer_paths(console_url),
            **config.config_paths(),
            **runtime.runtime_paths(),
            **webhooks.webhook_paths(),
            **ledger.ledger_paths(),
            **(portal.portal_paths(portal_url, dev=dev) if portal_url else {}),
        },
        "webhooks": {**ledger.ledger_webhooks(), **webhooks.legacy_webhooks()},
    }
