"""The client-safe projection of an account handoff (spec 4.5).

A backend may pass this to its frontend; ``authorization`` (with its
``authorizationCode``) and anything else the service adds must not reach a general UI
state endpoint, analytics, logs or browser cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

HANDOFF_FIELDS = ("portalUrl", "expiresAt", "appSlug", "gameAccountLabel")
CONNECTION_FIELDS = ("id", "status", "ownerWallet", "budgetRemaining", "boundAt")


def _pick(value: Any, fields: tuple[str, ...]) -> dict[str, Any] | None:
    if not isinstance(value, Mapping):
        return None
    return {name: value[name] for name in fields if name in value}


def client_safe(handoff_response: Mapping[str, Any]) -> dict[str, Any]:
    """``status``, ``handoff`` and ``connection`` with only their allow-listed fields.

    ``handoff``/``connection`` are ``None`` when the response has none (a
    ``needs_connection`` handoff has no connection); fields absent from the response stay
    absent. Everything else, ``authorization`` first of all, is dropped.
    """
    if not isinstance(handoff_response, Mapping):
        raise TypeError("client_safe() takes the parsed JSON object of a handoff response")
    return {
        "status": handoff_response.get("status"),
        "handoff": _pick(handoff_response.get("handoff"), HANDOFF_FIELDS),
        "connection": _pick(handoff_response.get("connection"), CONNECTION_FIELDS),
    }
