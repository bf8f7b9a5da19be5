"""JSON shape of a runtime for its developer (API and CLI)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from payments.models import App


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
