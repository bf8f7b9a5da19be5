"""The runtime operations of the developer API: authentication, scopes, bad input, states,
stored reports, and one notification under concurrent domain requests (PostgreSQL)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from sqlalchemy import select

from payments.developer.models import NotificationKind, OperatorNotification
from payments.models import App
from payments.runtime.api import CHANGE_LIMIT
from tests.factories import add_owned_app
from tests.manifest.origin import good_manifest
from tests.runtime.world import SLUG, World

RUNTIME = f"/api/developer/apps/{SLUG}/runtime"


def configure(api: httpx.Client, origin: str, **body: Any) -> httpx.Response:
    return api.post(f"{RUNTIME}/configure", json={"origin": origin, **body})


def test_scopes_grants_and_console_sessions(world: World) -> None:
    reader = world.api(world.grant("apps:read"))
    assert reader.get(RUNTIME).json()["runtime"]["status"] == "not_configured"
    refused = configure(reader, world.origin_url)
    assert refused.status_code == 403
    body = refused.json()
    assert (body["code"], body["scope"]) == ("developer_cli_scope_missing", "runtime:write")
    assert body["command"] == "svc auth browser --app game --scopes apps:read,runtime:write"
    writer = world.api(world.grant("runtime:write"))
    assert writer.get(RUNTIME).json()["code"] == "developer_cli_scope_missing"
    anonymous = httpx.post(f"{world.url}{RUNTIME}/configure", json={"origin": world.origin_url})
    assert anonymous.status_code == 401
    assert anonymous.json()["code"] == "developer_auth_required"
    # A grant for another app of the same developer does not reach this one.
    with world.sessions() as session:
        org = session.scalars(select(App.organization_id).where(App.slug == SLUG)).one()
    assert org is not None
    add_owned_app(world.sessions, org, "other")
    other = world.api(world.grant("runtime:write", app="other"))
    assert configure(other, world.origin_url).json()["code"] == "developer_cli_app_mismatch"
    # The console: a session with its CSRF token; without the token, refused.
    with world.console() as console:
        saved = configure(console, world.origin_url)
        assert saved.status_code == 200, saved.text
        del console.headers["x-csrf-token"]
        assert configure(console, world.origin_url).json()["code"] == "csrf_failed"


BAD_BODIES: list[tuple[dict[str, Any], int, str]] = [
    ({"origin": "http://example.com"}, 422, "runtime_origin_invalid"),
    ({"origin": "https://portal.localhost"}, 422, "runtime_origin_invalid"),
    ({"origin": "https://127.0.0.1"}, 422, "runtime_origin_invalid"),  # the API host here
    ({"origin": "https://console.localhost"}, 422, "runtime_origin_invalid"),
    ({"origin": "https://game.apps.localhost"}, 422, "runtime_origin_invalid"),
    ({"origin": "https://apps.localhost"}, 422, "runtime_origin_invalid"),
    ({"origin": "https://169.254.169.254"}, 422, "runtime_origin_invalid"),
    ({"origin": "https://metadata.google.internal"}, 422, "runtime_origin_invalid"),
    ({"origin": "https://example.com/play"}, 422, "runtime_origin_invalid"),
    ({"origin": "https://2130706433"}, 422, "runtime_origin_invalid"),
    ({"origin": "not a url"}, 422, "runtime_origin_invalid"),
    ({"origin": ""}, 422, "runtime_origin_invalid"),
    ({"origin": "https://" + "a" * 3000 + ".com"}, 422, "invalid_field"),
    ({"origin": 42}, 422, "invalid_field"),
    ({}, 422, "missing_field"),
    ({"origin": "https://game.example.com", "appPath": None}, 422, "invalid_field"),
    ({"origin": "https://game.example.com", "appPath": "play"}, 422, "invalid_field"),
    ({"origin": "https://game.example.com", "entryPath": "//evil.example"}, 422,
     "invalid_field"),
    ({"origin": "https://game.example.com", "entryPath": 3}, 422, "invalid_field"),
]


def test_bad_input_is_refused_in_the_envelope(world: World) -> None:
    api = world.api(world.grant("runtime:write"))
    for body, status, code in BAD_BODIES:
        response = api.post(f"{RUNTIME}/configure", json=body)
        assert response.status_code == status, (body, response.text)
        assert response.json()["code"] == code, body
        assert response.json()["message"]
    with world.sessions() as session:
        assert session.scalars(select(App.runtime_origin).where(App.slug == SLUG)).one() is None


def test_not_json_and_not_an_object(world: World) -> None:
    api = world.api(world.grant("runtime:write"))
    assert api.post(f"{RUNTIME}/configure", content=b"{",
                    headers={"content-type": "application/json"}).json()["code"] == "invalid_json"
    assert api.post(f"{RUNTIME}/configure", json=[1]).json()["code"] == "invalid_json"
    assert api.post(f"{RUNTIME}/configure", content=b"origin=x").status_code == 415


def test_states_refuse_out_of_order_operations(world: World) -> None:
    api = world.api(world.grant("runtime:write", "apps:read"))
    for action in ("verify", "disable"):
        response = api.post(f"{RUNTIME}/{action}")
        assert (response.status_code, response.json()["code"]) == (409,
                                                                   "runtime_not_configured")
    assert configure(api, world.origin_url).json()["runtime"]["status"] == "pending_verification"
    response = api.post(f"{RUNTIME}/domain-request")
    assert (response.status_code, response.json()["code"]) == (409, "runtime_not_active")
    unknown = api.post("/api/developer/apps/nope/runtime/verify")
    assert unknown.json()["code"] in ("app_not_found", "developer_cli_app_mismatch")


def test_reports_are_stored_and_a_failing_active_runtime_stops(world: World) -> None:
    api = world.api(world.grant("runtime:write", "apps:read"))
    configure(api, world.origin_url)
    world.origin.manifest = good_manifest(world.app_id, SLUG)
    assert api.post(f"{RUNTIME}/verify").status_code == 200
    runtime = api.get(RUNTIME).json()["runtime"]
    assert runtime["status"] == "active" and runtime["lastReport"]["passed"] is True
    assert runtime["verifiedAt"] and runtime["checkedAt"]

    world.origin.webhook_status = 404  # the webhook route went away
    failed = api.post(f"{RUNTIME}/verify")
    assert failed.status_code == 422
    body = failed.json()
    assert body["code"] == "runtime_verification_failed"
    assert "webhook path is refused with 401" in body["message"]
    assert body["runtime"]["status"] == "pending_verification"
    probe = next(c for c in body["checks"] if c["id"] == "webhook_probe")
    assert (probe["passed"], probe["seen"], probe["expected"]) == (False, "HTTP 404", "HTTP 401")
    stored = api.get(RUNTIME).json()["runtime"]
    assert stored["lastReport"]["checks"] == body["checks"]
    assert stored["verifiedAt"] == runtime["verifiedAt"]  # the last success stays known


def test_configure_keeps_an_unchanged_active_runtime(world: World) -> None:
    api = world.api(world.grant("runtime:write"))
    configure(api, world.origin_url)
    world.origin.manifest = good_manifest(world.app_id, SLUG)
    assert api.post(f"{RUNTIME}/verify").status_code == 200
    same = configure(api, world.origin_url + "/")  # the same origin, spelled differently
    assert same.json()["changed"] is False
    assert same.json()["runtime"]["status"] == "active"
    moved = configure(api, world.origin_url, appPath="/play")
    assert moved.json()["changed"] is True
    assert moved.json()["runtime"]["status"] == "pending_verification"
    assert moved.json()["runtime"]["lastReport"] is None  # about other paths: cleared


def test_app_creation_and_domain_requests_notify_operators_only(world: World) -> None:
    with world.console() as console:
        created = console.post("/api/developer/apps", json={"name": "Second Game"})
        assert created.status_code == 201, created.text
        views = [created.text, console.get("/api/developer/apps").text]
    api = world.api(world.grant("runtime:write", "apps:read"))
    configure(api, world.origin_url)
    world.origin.manifest = good_manifest(world.app_id, SLUG)
    assert api.post(f"{RUNTIME}/verify").status_code == 200
    asked = api.post(f"{RUNTIME}/domain-request")
    assert asked.status_code == 200
    assert asked.json()["runtime"]["domainRequestStatus"] == "pending_manual_dns"
    assert asked.json()["runtime"]["hostedReviewStatus"] == "pending"
    views += [asked.text, api.get(RUNTIME).text, api.get(f"/api/developer/apps/{SLUG}").text]
    with world.sessions() as session:
        kinds = sorted((n.kind.value, n.payload.get("slug")) for n in session.scalars(
            select(OperatorNotification)))
    assert kinds == [("developer_app_requested", "second-game"),
                     ("runtime_domain_requested", SLUG)]
    for text in views:  # internal: no developer-facing answer carries them
        assert "developer_app_requested" not in text
        assert "runtime_domain_requested" not in text


def test_concurrent_domain_requests_file_one_notification(world: World) -> None:
    api = world.api(world.grant("runtime:write"))
    configure(api, world.origin_url)
    world.origin.manifest = good_manifest(world.app_id, SLUG)
    assert api.post(f"{RUNTIME}/verify").status_code == 200
    token = api.headers["authorization"]

    def ask(_: int) -> httpx.Response:
        return httpx.post(f"{world.url}{RUNTIME}/domain-request", timeout=60,
                          headers={"authorization": token})
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, range(8)))
    assert {a.status_code for a in answers} == {200}
    assert sum(a.json()["requested"] for a in answers) == 1
    with world.sessions() as session:
        notes = session.scalars(select(OperatorNotification).where(
            OperatorNotification.kind == NotificationKind.RUNTIME_DOMAIN_REQUESTED)).all()
    assert len(notes) == 1


def test_loopback_origins_need_the_local_switch(db_url: str, sessions: Any, tmp_path: Any,
                                                ca: Any) -> None:
    from tests.runtime.world import runtime_world
    with runtime_world(db_url, sessions, tmp_path, ca, allow_private_origins=False) as strict:
        api = strict.api(strict.grant("runtime:write"))
        for origin in (strict.origin_url, "https://localhost", "http://localhost:8080",
                       "https://10.0.0.8", "https://[::1]:8443"):
            refused = configure(api, origin)
            assert refused.status_code == 422, origin
            assert refused.json()["code"] == "runtime_origin_invalid"
        # A public-looking name that resolves to loopback: saved, refused at verification.
        strict.dns.records["sneaky.example.com"] = ["127.0.0.1"]
        sneaky = f"https://sneaky.example.com:{strict.origin.port}"
        assert configure(api, sneaky).status_code == 200
        failed = api.post(f"{RUNTIME}/verify").json()
        assert failed["code"] == "runtime_verification_failed"
        fetch = next(c for c in failed["checks"] if c["id"] == "manifest_fetch")
        assert fetch["seen"].endswith("which is not a public address")
    assert strict.origin.requests == []


def test_runtime_changes_are_limited_per_developer(world: World) -> None:
    """Runtime changes spend the developer's budget (60 per 10 minutes), counted after
    authentication: anonymous calls get 401 and spend nothing."""
    for _ in range(CHANGE_LIMIT.max_hits + 5):
        anonymous = httpx.post(f"{world.url}{RUNTIME}/disable")
        assert anonymous.status_code == 401, anonymous.text
    writer = world.api(world.grant("runtime:write"))
    answers = [writer.post(f"{RUNTIME}/disable") for _ in range(CHANGE_LIMIT.max_hits)]
    assert {a.status_code for a in answers} == {409}, answers[0].text  # nothing to disable
    limited = writer.post(f"{RUNTIME}/disable")
    assert limited.status_code == 429, limited.text
    assert limited.json()["code"] == "rate_limited"
    assert 0 < int(limited.headers["retry-after"]) <= CHANGE_LIMIT.per_seconds
    assert configure(writer, world.origin_url).status_code == 429  # one budget for changes


def test_the_entry_path_follows_the_app_path_unless_given(world: World) -> None:
    """Spec 2.8 defaults both to /; an app at /play has its full-page returns land there
    (the reference app's manifest says entryPath = appPath), unless set apart."""
    api = world.api(world.grant("runtime:write"))
    played = configure(api, world.origin_url, appPath="/play")
    assert played.status_code == 200, played.text
    assert (played.json()["runtime"]["appPath"], played.json()["runtime"]["entryPath"]) == (
        "/play", "/play")
    apart = configure(api, world.origin_url, appPath="/play", entryPath="/")
    assert apart.json()["runtime"]["entryPath"] == "/"
    plain = configure(api, world.origin_url)
    assert (plain.json()["runtime"]["appPath"], plain.json()["runtime"]["entryPath"]) == (
        "/", "/")
