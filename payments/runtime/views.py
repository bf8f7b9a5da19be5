"""A runtime for its developer: the JSON shape (API and CLI) and, in words, why its host
does not serve it (the setup page and the console say the same)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from payments.models import (
    App,
    AppStatus,
    DomainRequestStatus,
    RuntimeBlocker,
    RuntimeStatus,
    runtime_blockers,
)


def runtime_view(app: App, runtime_url: str) -> dict[str, Any]:
    checks = [c for c in app.runtime_checks if isinstance(c, dict)]
    return {
        "app": app.slug, "appId": app.id, "status": app.runtime_status.value,
        "origin": app.runtime_origin, "appPath": app.runtime_app_path,
        "entryPath": app.runtime_entry_path, "url": runtime_url,
        "domainRequestStatus": app.runtime_domain_request_status.value,
        "hostedReviewStatus": app.hosted_review_status.value,
        "killSwitch": app.kill_switch,
        "checkedAt": _time(app.runtime_checked_at),
        "verifiedAt": _time(app.runtime_verified_at),
        "domainRequestedAt": _time(app.runtime_domain_requested_at),
        "lastReport": None if not checks else {
            "passed": all(c.get("passed") for c in checks), "checks": checks},
    }


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def not_served_reasons(app_status: str, kill_switch: bool, runtime_status: str,
                       domain_status: str, origin: str | None) -> tuple[str, ...]:
    """Why ``<slug>.{apps_domain}`` does not serve this runtime, one sentence per cause
    (with the command that moves it on where the developer can); none when it serves."""
    reasons: list[str] = []
    if kill_switch:
        reasons.append("The app has been paused by the service operators.")
    if app_status != AppStatus.ACTIVE:
        reasons.append(f"The app is {app_status}, not active.")
    for blocker in runtime_blockers(runtime_status, domain_status, origin):
        if blocker is RuntimeBlocker.RUNTIME_NOT_ACTIVE:
            reasons.append(_RUNTIME_REASONS.get(runtime_status, runtime_status))
        elif blocker is RuntimeBlocker.DOMAIN_NOT_APPROVED:
            reasons.append(_DOMAIN_REASONS.get(domain_status, domain_status))
        else:
            reasons.append("No runtime origin has been saved for this app.")
    return tuple(reasons)


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
