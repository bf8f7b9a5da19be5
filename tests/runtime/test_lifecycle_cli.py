"""The whole runtime lifecycle as people drive it: the ``svc`` executable for the developer,
``svc-ops`` for the operator, a browser-like visitor on the runtime host, on SQLite and
PostgreSQL. The router runs with Redis and a 60 s cache, so each change being served at once
proves it was published to the routers, not that a cache expired.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.developer.models import NotificationKind, OperatorNotification
from payments.models import App, DomainRequestStatus, RuntimeStatus
from payments.runtime.models import OperatorAction
from tests.manifest.origin import PAY_TO, good_manifest
from tests.runtime.world import SLUG, World, runtime_world


@pytest.fixture
def live(db_url: str, sessions: sessionmaker[Session], tmp_path: Path, ca: trustme.CA,
         redis_url: str) -> Iterator[World]:
    with runtime_world(db_url, sessions, tmp_path, ca, redis_url=redis_url,
                       app_cache_ttl_shared=60.0) as world:
        yield world


def served(world: World) -> bool:
    page = world.visit("/play")
    if page.status_code == 200:
        assert "Runtime from the developer origin" in page.text
        return True
    assert page.status_code == 503
    return False


def app_row(world: World) -> App:
    with world.sessions() as session:
        return session.scalars(select(App).where(App.slug == SLUG)).one()


def test_runtime_lifecycle_through_the_cli(live: World) -> None:
    world = live
    world.sign_in("apps:read,runtime:write")
    page = world.visit()
    assert page.status_code == 503 and "has not been configured" in page.text

    early = world.svc("runtime", "verify")
    assert early.returncode == 1
    assert "svc runtime configure" in early.stderr

    # Configure: saved, waiting for verification.
    done = world.svc("runtime", "configure", "--origin", world.origin_url, "--app-path",
                     "/play", "--json")
    assert done.returncode == 0, done.stderr
    runtime = json.loads(done.stdout)["runtime"]
    assert (runtime["status"], runtime["origin"], runtime["appPath"]) == (
        "pending_verification", world.origin_url, "/play")
    # Not given, the entry path follows the app path: a full-page return lands on /play.
    assert runtime["entryPath"] == "/play"

    # A manifest with a wrong pay_to and a null app path: readable failures, exit 1.
    world.origin.manifest = {**good_manifest(world.app_id, SLUG, pay_to="0x" + "ab" * 20,
                                             entryPath="/play"),
                             "app_path": None, "runtimeOrigin": world.origin_url}
    del world.origin.manifest["appPath"]
    failed = world.svc("runtime", "verify")
    assert failed.returncode == 1, failed.stderr
    assert "FAIL  payTo: payTo equals the app's pay_to" in failed.stdout
    assert f"expected: {PAY_TO}" in failed.stdout
    assert "FAIL  appPath" in failed.stdout and "seen:     null" in failed.stdout
    assert "PASS  webhook_probe" in failed.stdout
    assert "Verification failed: 2 of 13 checks did not pass" in failed.stdout
    as_json = world.svc("runtime", "verify", "--json")
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert report["error"]["code"] == "runtime_verification_failed"
    assert [c["id"] for c in report["report"]["checks"] if not c["passed"]] == [
        "payTo", "appPath"]
    page = world.visit()
    assert "Failed: payTo equals the app&#x27;s pay_to" in page.text
    assert world.origin_url not in page.text and f"localhost:{world.origin.port}" not in page.text

    # Fixed: active, but the hostname is not public before its domain is approved.
    world.origin.manifest = good_manifest(world.app_id, SLUG, appPath="/play",
                                          entryPath="/play", runtimeOrigin=world.origin_url)
    passed = world.svc("runtime", "verify")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Verified: all 13 checks passed. Status: active." in passed.stdout
    assert "svc runtime request-domain" in passed.stdout
    assert not served(world)
    assert "has not been requested" in world.visit().text

    # Request the domain: pending, one internal notification, none on a second request.
    asked = world.svc("runtime", "request-domain")
    assert asked.returncode == 0, asked.stderr
    assert f"Requested {SLUG}.apps.localhost" in asked.stdout
    again = world.svc("runtime", "request-domain", "--json")
    assert json.loads(again.stdout)["requested"] is False
    with world.sessions() as session:
        notes = session.scalars(select(OperatorNotification).where(
            OperatorNotification.kind == NotificationKind.RUNTIME_DOMAIN_REQUESTED)).all()
        assert [(n.app_id, n.payload["hostname"]) for n in notes] == [
            (world.app_id, f"{SLUG}.apps.localhost")]
    assert "runtime_domain_requested" not in again.stdout  # developers never see it
    assert not served(world)
    assert "waiting for operator approval" in world.visit().text

    # The operator: the review comes first, then DNS must point at the router.
    code, _, err = world.ops("domain", "approve", SLUG, "--operator", "alice")
    assert code == 1 and "approve its hosted-app review first" in err
    code, out, _ = world.ops("review", "list")
    assert code == 0 and out.startswith(f"{SLUG}\t")
    code, out, err = world.ops("review", "approve", SLUG, "--operator", "alice")
    assert code == 0, err
    code, out, err = world.ops("domain", "approve", SLUG, "--operator", "alice")
    assert code == 0, err
    assert f"approved {SLUG}.apps.localhost (DNS: 127.0.0.1)" in out
    assert served(world)
    origin_saw = world.origin.requests[-1]
    assert (origin_saw.path, origin_saw.headers["Host"]) == (
        "/play", f"localhost:{world.origin.port}")

    # Disable: the inactive page; verifying turns it back on.
    off = world.svc("runtime", "disable")
    assert off.returncode == 0 and "shows the inactive page" in off.stdout
    assert not served(world)
    assert "disabled by the developer" in world.visit().text
    assert world.svc("runtime", "verify").returncode == 0
    assert served(world)

    # The kill switch wins over everything the developer does.
    code, _, err = world.ops("kill-switch", "on", SLUG, "--reason", "reported abuse")
    assert code == 0, err
    assert not served(world)
    assert "paused by the service operators" in world.visit().text
    assert world.svc("runtime", "verify").returncode == 0
    assert not served(world)
    assert world.ops("kill-switch", "off", SLUG, "--operator", "bob")[0] == 0
    assert served(world)

    status = world.svc("runtime", "status", "--json")
    final = json.loads(status.stdout)["runtime"]
    assert (final["status"], final["domainRequestStatus"], final["killSwitch"]) == (
        "active", "approved", False)
    row = app_row(world)
    assert row.runtime_status is RuntimeStatus.ACTIVE
    assert row.runtime_domain_request_status is DomainRequestStatus.APPROVED
    with world.sessions() as session:
        done_actions = [(a.operator, a.action.value) for a in session.scalars(
            select(OperatorAction).order_by(OperatorAction.id))]
        handled = session.scalars(select(OperatorNotification.handled_at).where(
            OperatorNotification.kind == NotificationKind.RUNTIME_DOMAIN_REQUESTED)).one()
    assert done_actions == [("alice", "review_approved"), ("alice", "domain_approved"),
                            ("opsuser", "kill_switch_on"), ("bob", "kill_switch_off")]
    assert handled is not None
    code, out, _ = world.ops("actions", "--app", SLUG)
    assert code == 0
    assert out.splitlines()[0].split("\t")[1:3] == ["bob", "kill_switch_off"]
    assert '"dns": ["127.0.0.1"]' in out


def test_missing_scope_names_it_and_the_sign_in_to_rerun(world: World) -> None:
    world.sign_in("apps:read")
    shown = world.svc("runtime", "status")
    assert shown.returncode == 0, shown.stderr
    assert "status:          not_configured" in shown.stdout
    refused = world.svc("runtime", "configure", "--origin", world.origin_url)
    assert refused.returncode == 3
    assert "lacks the scope 'runtime:write'" in refused.stderr
    assert "svc auth browser --app game --scopes apps:read,runtime:write" in refused.stderr
    as_json = world.svc("runtime", "verify", "--json")
    assert as_json.returncode == 3
    assert json.loads(as_json.stdout)["error"]["code"] == "developer_cli_scope_missing"


def test_refused_origins_are_usage_errors(world: World) -> None:
    world.sign_in("runtime:write")
    for origin, words in (("https://127.0.0.1:8443", "service's own hosts"),
                          ("https://game.apps.localhost", "proxy domain"),
                          ("https://example.com/app", "without a path"),
                          ("ftp://example.com", "https://")):
        refused = world.svc("runtime", "configure", "--origin", origin)
        assert refused.returncode == 2, (origin, refused.stderr)
        assert words in refused.stderr, refused.stderr
    null_path = world.svc("runtime", "configure", "--origin", world.origin_url,
                          "--entry-path", "play")
    assert null_path.returncode == 2 and "concrete path" in null_path.stderr
    (world.home / "svc.toml").write_text(f'app_slug = "game"\n[runtime]\norigin = '
                                         f'"{world.origin_url}"\n')
    from_project = world.svc("runtime", "configure")
    assert from_project.returncode == 0, from_project.stderr
    assert world.origin_url in from_project.stdout
