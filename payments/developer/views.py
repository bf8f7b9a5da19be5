"""JSON shapes of developer-side objects; secrets never appear here."""

from __future__ import annotations

from typing import Any

from payments.developer.models import ApiKey, CliGrant
from payments.models import App


def app_view(app: App, runtime_url: str) -> dict[str, Any]:
    return {
        "id": app.id, "name": app.name, "slug": app.slug, "type": app.type.value,
        "headline": app.headline, "entryUrl": app.entry_url, "environment": app.environment,
        "payTo": app.pay_to, "payToStatus": app.pay_to_status.value,
        "portalListingStatus": app.portal_listing_status.value, "status": app.status.value,
        "recipientAllowlistStatus": app.recipient_allowlist_status.value,
        "distributionTargets": list(app.distribution_targets), "tags": list(app.tags),
        "runtime": {
            "origin": app.runtime_origin, "status": app.runtime_status.value,
            "appPath": app.runtime_app_path, "entryPath": app.runtime_entry_path,
            "url": runtime_url,
        },
        "runtimeDomainRequestStatus": app.runtime_domain_request_status.value,
        "killSwitch": app.kill_switch,
        "createdAt": app.created_at.isoformat(),
    }


def key_view(key: ApiKey) -> dict[str, Any]:
    return {
        "id": key.id, "label": key.label, "preview": key.preview, "scopes": list(key.scopes),
        "environment": key.environment,
        # An organization key has no app: it may act on every app of its organization.
        "ownership": "app" if key.app_id is not None else "organization", "appId": key.app_id,
        "organizationId": key.organization_id, "createdAt": key.created_at.isoformat(),
        "revokedAt": key.revoked_at.isoformat() if key.revoked_at else None,
        "lastUsedAt": key.last_used_at.isoformat() if key.last_used_at else None,
    }


def grant_view(grant: CliGrant, app_slug: str) -> dict[str, Any]:
    return {"id": grant.id, "app": app_slug, "appId": grant.app_id, "scopes": list(grant.scopes),
            "expiresAt": grant.expires_at.isoformat(),
            "revokedAt": grant.revoked_at.isoformat() if grant.revoked_at else None}
