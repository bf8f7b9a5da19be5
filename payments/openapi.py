"""The OpenAPI 3.1 description served at ``{docs_url}/openapi.json``.

It grows with every endpoint; a test checks each route of the API host is described.
"""

from __future__ import annotations

from typing import Any

from payments.developer.openapi import SECURITY_SCHEMES, developer_paths

ERROR = {
    "type": "object", "required": ["code", "message"],
    "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
    "additionalProperties": True,
}


def openapi_document(base_url: str) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "Small-payment settlement service", "version": "1.2.0",
                 "description": "Errors use the envelope `Error`: a stable `code` and a "
                                "human `message`, plus optional fields such as `scope`."},
        "servers": [{"url": base_url}],
        "components": {
            "schemas": {"Error": ERROR},
            "responses": {"Error": {"description": "an error in the envelope", "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}},
            "securitySchemes": SECURITY_SCHEMES,
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
            **developer_paths(),
        },
    }
