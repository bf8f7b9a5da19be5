"""Whether a runtime host may be proxied, and why not: a pure decision over app state.

The decision is made once per cached :class:`RuntimeRoute` (the app directory keeps routes
until the app changes), so the proxy's hot path reads one attribute per request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from payments.models import App
from payments.runtime.views import not_served_reasons


@dataclass(frozen=True)
class RuntimeRoute:
    """What the router needs to know about an app, detached from the database session."""

    app_id: str
    slug: str
    name: str
    origin: str | None
    app_status: str
    runtime_status: str
    domain_status: str
    kill_switch: bool
    entry_path: str
    app_path: str
    checks: tuple[dict[str, Any], ...] = field(default=())
    checked_at: str | None = None  # when the last verification ran (ISO 8601)

    @classmethod
    def from_app(cls, app: App) -> RuntimeRoute:
        return cls(
            app_id=app.id, slug=app.slug, name=app.name, origin=app.runtime_origin,
            app_status=app.status.value, runtime_status=app.runtime_status.value,
            domain_status=app.runtime_domain_request_status.value,
            kill_switch=app.kill_switch, entry_path=app.runtime_entry_path or "/",
            app_path=app.runtime_app_path or "/",
            checks=tuple(c for c in app.runtime_checks if isinstance(c, dict)),
            checked_at=app.runtime_checked_at.isoformat() if app.runtime_checked_at else None,
        )

    @cached_property
    def decision(self) -> Gate:
        return _decide(self)


@dataclass(frozen=True)
class Gate:
    open: bool
    status: int
    reasons: tuple[str, ...] = ()


NOT_FOUND = Gate(False, 404, ("No app uses this address.",))


def gate(route: RuntimeRoute | None) -> Gate:
    """Open only for an existing, active app with a verified (``active``) runtime, a saved
    origin, an approved domain request and no kill switch.

    The exact hostname becomes public only after an operator approved the domain request
    (spec 3.1), in dev as everywhere: dev seeds its demo app approved.
    """
    return NOT_FOUND if route is None else route.decision


def _decide(route: RuntimeRoute) -> Gate:
    reasons = not_served_reasons(route.app_status, route.kill_switch, route.runtime_status,
                                 route.domain_status, route.origin)
    return Gate(False, 503, reasons) if reasons else Gate(True, 200)
