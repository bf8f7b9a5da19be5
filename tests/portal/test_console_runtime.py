"""The console's runtime page: served or not and why (the setup page's words), the saved
origin, the last verification check by check, escaped, and only for the app's developers."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from payments.db import utcnow
from payments.models import DomainRequestStatus, RuntimeStatus
from tests.factories import add_developer, add_owned_app, update_app
from tests.portal.conftest import Console, log_in


def test_runtime_page_follows_the_runtime_from_nothing_to_served(
        console: Console, developer: tuple[str, str], sessions: sessionmaker[Session]) -> None:
    add_owned_app(sessions, developer[1], "game", runtime_domain_request_status=(
        DomainRequestStatus.NOT_REQUESTED))
    runtime_url = console.settings.runtime_url("game")
    with console.client() as client:
        log_in(client)
        assert 'href="/apps/game/runtime"' in client.get("/apps/game").text

        fresh = client.get("/apps/game/runtime")
        assert fresh.status_code == 200
        assert "Not served" in fresh.text and runtime_url in fresh.text
        assert ("The runtime has not been configured yet (run <code>svc runtime configure"
                "</code>).") in fresh.text
        assert "No runtime origin has been saved for this app." in fresh.text
        assert "The runtime domain has not been requested" in fresh.text
        assert "Not verified yet." in fresh.text

        # saved and checked, one check failing with what the origin answered (escaped)
        update_app(sessions, "game", runtime_origin="https://game.example.com",
                   runtime_status=RuntimeStatus.PENDING_VERIFICATION,
                   runtime_checked_at=utcnow(), runtime_checks=[
                       {"id": "manifest_fetch", "rule": "the manifest is served",
                        "passed": True, "seen": "200", "expected": "200", "fix": ""},
                       {"id": "appId", "rule": "appId is the app's id", "passed": False,
                        "seen": "<script>alert(1)</script>", "expected": "zapp_x",
                        "fix": "set appId in /.well-known/svc.json"}])
        checked = client.get("/apps/game/runtime").text
        assert "<code>https://game.example.com</code>" in checked
        assert "Some checks failed." in checked and "<strong>failed</strong>" in checked
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in checked
        assert "<script>alert(1)" not in checked
        assert "set appId in /.well-known/svc.json" in checked
        assert "waiting for verification" in checked
        assert "No runtime origin" not in checked

        update_app(sessions, "game", runtime_status=RuntimeStatus.ACTIVE,
                   runtime_domain_request_status=DomainRequestStatus.APPROVED)
        served = client.get("/apps/game/runtime").text
        assert f'Served at <a href="{runtime_url}/">' in served
        assert "Not served" not in served

        update_app(sessions, "game", kill_switch=True)
        paused = client.get("/apps/game/runtime").text
        assert "Not served" in paused
        assert "The app has been paused by the service operators." in paused


def test_runtime_page_is_for_the_apps_developers_only(
        console: Console, developer: tuple[str, str], sessions: sessionmaker[Session]) -> None:
    _, other_org = add_developer(sessions, "dev2")
    add_owned_app(sessions, other_org, "theirs")
    with console.client() as client:
        signed_out = client.get("/apps/theirs/runtime")
        assert signed_out.status_code == 303
        assert signed_out.headers["location"].startswith("/login")
        log_in(client)
        refused = client.get("/apps/theirs/runtime")
        assert refused.status_code == 404
        assert "No app &#x27;theirs&#x27; in your organization." in refused.text
        assert "Runtime" not in refused.text  # nothing of another organization's runtime
        assert client.get("/apps/nope/runtime").status_code == 404
