"""The runtime's setup page (anyone can open it) never shows a secret, the origin or the
values a verification check saw, even when the app has keys, a webhook endpoint, and a
failed report whose checks saw leaked secrets."""

from __future__ import annotations

from html import escape

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from manifest.rules import Check, Expected, check_document
from manifest.url_policy import CheckedUrl
from payments.db import transaction, utcnow
from payments.developer.keys import create_key
from payments.models import App, RuntimeStatus
from payments.webhooks.endpoints import create_endpoint
from payments.webhooks.signing_secrets import SecretBox
from router.settings import DEV_SECRET_KEY
from tests.factories import add_developer, add_owned_app, update_app
from tests.router.conftest import RouterFactory

ORIGIN = "https://origin-7f3a.example.net"
HOOK_URL = "https://hooks-9c1b.example.org/api/svc/webhook"
PAY_TO = "0x" + "a1" * 20
WRONG_PAY_TO = "0x" + "b2" * 20
STAGING = "https://staging-4d2e.internal.example:8443"
TOKEN_PATH = "/play?token=s3cr3t-77"


def seed_app_with_secrets(sessions: sessionmaker[Session]) -> tuple[list[Check], list[str]]:
    """An app with a live key and a webhook endpoint whose manifest leaked both secrets.

    Returns the stored checks and every value that must stay off the page.
    """
    developer_id, org_id = add_developer(sessions, "dev1")
    app = add_owned_app(sessions, org_id, "game", origin=ORIGIN, pay_to=PAY_TO,
                        runtime_status=RuntimeStatus.PENDING_VERIFICATION)
    now = utcnow()
    with transaction(sessions) as session:
        key = create_key(session, organization_id=org_id, app_id=app.id, label="backend",
                         scopes=["orders:create"], environment="live",
                         created_by=developer_id, now=now).secret
        stored = session.get(App, app.id)
        assert stored is not None
        hook = create_endpoint(
            session, stored, CheckedUrl(url=HOOK_URL, scheme="https",
                                        host="hooks-9c1b.example.org", port=443,
                                        path="/api/svc/webhook", ip_literal=False),
            ["payment.delivered"], SecretBox(DEV_SECRET_KEY), now).secret
    assert key.startswith("zpk_live_") and hook.startswith("zwhsec_")
    # The manifest a careless developer served: secrets where ids and paths belong.
    manifest = {"appId": key, "slug": "game", "payTo": WRONG_PAY_TO, "webhookPath": hook,
                "paymentSubmittedPath": "/api/svc/payment-submitted", "appPath": TOKEN_PATH,
                "entryPath": "/", "runtimeOrigin": STAGING}
    expected = Expected(app_id=app.id, slug="game", pay_to=PAY_TO, app_path="/",
                        entry_path="/", runtime_origin=ORIGIN)
    checks = [Check("origin", "the origin is a developer-owned public HTTPS origin", True,
                    seen=ORIGIN),
              Check("manifest_fetch", "GET /.well-known/svc.json answers 200", True,
                    seen="HTTP 200", expected="HTTP 200"),
              *check_document(manifest, expected)]
    update_app(sessions, "game", runtime_checks=[c.as_dict() for c in checks],
               runtime_checked_at=now)
    return checks, [key, hook, ORIGIN, HOOK_URL, WRONG_PAY_TO, STAGING, TOKEN_PATH]


@pytest.mark.parametrize("path", ["/", "/play/level-2?x=1"])
def test_setup_page_never_shows_secrets_origin_or_seen_values(
        start_router: RouterFactory, sessions: sessionmaker[Session], path: str) -> None:
    checks, secrets = seed_app_with_secrets(sessions)
    failed = [c for c in checks if not c.passed]
    # The report really carries the values: otherwise this test would prove nothing.
    assert {c.id for c in failed} == {"appId", "payTo", "webhookPath", "appPath",
                                      "runtimeOrigin"}
    seen = [c.seen for c in failed if c.seen]
    assert any(s.startswith("zpk_live_") for s in seen)
    assert any(s.startswith("zwhsec_") for s in seen)
    assert STAGING in seen and WRONG_PAY_TO in seen

    with start_router() as router:
        response = httpx.get(router.url + path, headers={"host": router.host("game")},
                             follow_redirects=False, timeout=10)
    page = response.text
    assert response.status_code == 503
    assert "Game is not available right now" in page
    assert f"Passed: {len(checks) - len(failed)} of {len(checks)} checks." in page
    for check in failed:
        assert f"Failed: {escape(check.rule)}" in page, check.rule

    for prefix in ("zpk_", "zwhsec_", "zwh_"):
        assert prefix not in page, prefix
    for value in secrets + seen:
        assert value not in page and escape(value) not in page, value
    for host in ("origin-7f3a", "hooks-9c1b", "staging-4d2e"):
        assert host not in page
    for name, value in response.headers.items():
        assert "zpk_" not in value and "zwhsec_" not in value and ORIGIN not in value, name
