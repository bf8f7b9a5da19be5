"""Dev mode: what the ``demo`` app's reference backend needs from the service, made at
every start of ``svc-server dev``.

A webhook endpoint pointing at the reference app's ``/api/svc/webhook`` on loopback, with a
fresh signing secret, and a fresh ``zpk_`` key with the seven backend scopes (spec 5.1).
Both secrets go to the reference app in-process and nowhere else: they are never printed,
logged or written to a file. Rotating them at each start is simpler and safer than keeping
them somewhere between runs: the previous run's key is revoked and its secret forgotten.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction, utcnow
from payments.developer.keys import KEY_SCOPES, create_key, revoke_key
from payments.developer.models import ApiKey
from payments.models import App
from payments.webhooks.endpoints import (
    check_url,
    create_endpoint,
    resolve_url,
    rotate_secret,
    update_endpoint,
)
from payments.webhooks.models import EndpointStatus, WebhookEndpoint
from payments.webhooks.signing_secrets import SecretBox
from router.settings import Settings
from router.webhooks import url_checks

DEV_KEY_LABEL = "svc-server dev: reference app"
# The reference app grants from payment.delivered and records payment.settled.
DEMO_EVENTS = ["payment.delivered", "payment.settled"]


@dataclass(frozen=True)
class DemoBackend:
    """What the reference app is handed; ``repr`` never shows the secrets."""

    app_id: str
    webhook_id: str
    webhook_secret: str = field(repr=False)
    api_key: str = field(repr=False)


def seed_demo_backend(sessions: sessionmaker[Session], settings: Settings, app_id: str,
                      webhook_url: str) -> DemoBackend:
    """Point the demo app's one webhook endpoint at ``webhook_url`` with a new secret, and
    replace the dev key. The URL passes the same rules as the API's: a loopback receiver
    is accepted only because dev settings allow private origins, which production
    settings refuse, so ``svc-server serve`` could never register one this way."""
    checks = url_checks(settings)
    with sessions() as session:
        app = session.get(App, app_id)
        assert app is not None, "seed_demo runs first"
        checked = check_url(webhook_url, app, checks)
    resolve_url(checked, checks)  # outside any transaction, like the API
    box = SecretBox(settings.secret_key)
    now = utcnow()
    with transaction(sessions) as session:
        app = session.get(App, app_id)
        assert app is not None and app.organization_id is not None
        endpoint = session.scalar(select(WebhookEndpoint).where(WebhookEndpoint.app_id == app_id))
        if endpoint is None:
            created = create_endpoint(session, app, checked, list(DEMO_EVENTS), box, now)
            endpoint, secret = created.endpoint, created.secret
        else:
            update_endpoint(endpoint, checked=checked, events=list(DEMO_EVENTS), enabled=True,
                            now=now)
            secret = rotate_secret(endpoint, box, now)
        assert endpoint.status is EndpointStatus.ENABLED
        for old in session.scalars(select(ApiKey).where(
                ApiKey.app_id == app_id, ApiKey.label == DEV_KEY_LABEL,
                ApiKey.revoked_at.is_(None))):
            revoke_key(old, now)
        key = create_key(session, organization_id=app.organization_id, app_id=app_id,
                         label=DEV_KEY_LABEL, scopes=list(KEY_SCOPES), environment="test",
                         created_by=None, now=now)
        return DemoBackend(app_id=app_id, webhook_id=endpoint.id, webhook_secret=secret,
                           api_key=key.secret)
