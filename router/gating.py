"""Whether a runtime host may be proxied, and why not: a pure decision over app state.

The decision is made once per cached :class:`RuntimeRoute` (the app directory keeps routes
until the app changes), so the proxy's hot path reads one attribute per request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from payments.models import (
    App,
    AppStatus,
    DomainRequestStatus,
    RuntimeBlocker,
    RuntimeStatus,
    runtime_blockers,
)


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
    reasons: list[str] = []
    if route.kill_switch:
        reasons.append("The app has been paused by the service operators.")
    if route.app_status != AppStatus.ACTIVE:
        reasons.append(f"The app is {route.app_status}, not active.")
    for blocker in runtime_blockers(route.runtime_status, route.domain_status, route.origin):
        reasons.append(_words(blocker, route))
    if reasons:
        return Gate(False, 503, tuple(reasons))
    return Gate(True, 200)


def _words(blocker: RuntimeBlocker, route: RuntimeRoute) -> str:
    if blocker is RuntimeBlocker.RUNTIME_NOT_ACTIVE:
        return _RUNTIME_REASONS.get(route.runtime_status, route.runtime_status)
    if blocker is RuntimeBlocker.DOMAIN_NOT_APPROVED:
        return _DOMAIN_REASONS.get(route.domain_status, route.domain_status)
    return "No runtime origin has been saved for this app."


_RUNTIME_REASONS: dict[str, str] = {
    RuntimeStatus.NOT_CONFIGURED: "The runtime has not been configured yet "
                                  "(run `svc runtime configure`).",
    RuntimeStatus.PENDING_VERIFICATION: "The runtime is waiting for verification "
                                        "(run `svc runtime verify`).",
    RuntimeStatus.DISABLED: "The runtime has been disabled by the developer.",
}
_DOMAIN_REASONS: dict[str, str] = {
    DomainRequestStatus.NOT_REQUESTED: "The runtime domain has not been requested "
                                       "(run `svc runtime request-domain`).",
    DomainRequestStatus.PENDING_MANUAL_DNS: "The runtime domain request is waiting for "
                                            "operator approval.",
    DomainRequestStatus.REJECTED: "The runtime domain request was rejected.",
}
