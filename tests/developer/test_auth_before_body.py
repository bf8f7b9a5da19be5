"""The developer API (CLI grants and console sessions) authenticates before it judges a
body: a caller without valid credentials gets the same 401 whatever it sent, and learns
nothing of the fields an endpoint expects."""

from __future__ import annotations

import httpx
import pytest

from tests.developer.test_api import World

P = "/api/developer"
# Every developer endpoint that takes a body and needs a principal.
ENDPOINTS = [
    ("POST", f"{P}/apps"), ("PATCH", f"{P}/apps/game"),
    ("POST", f"{P}/apps/game/products"), ("PATCH", f"{P}/apps/game/products/retry"),
    ("POST", f"{P}/apps/game/keys"), ("PATCH", f"{P}/apps/game/keys/zkey_x"),
    ("POST", f"{P}/apps/game/webhooks"), ("PATCH", f"{P}/apps/game/webhooks/zwh_x"),
    ("POST", f"{P}/apps/game/runtime/configure"),
    ("POST", f"{P}/config/plan"), ("POST", f"{P}/config/apply"),
    ("POST", f"{P}/config/rollback"),
]
BODIES: list[tuple[str, bytes, str]] = [
    ("empty JSON", b"{}", "application/json"),
    ("wrong types", b'{"name": 5, "url": [], "config": "x", "scopes": 1}', "application/json"),
    ("not JSON", b"{", "application/json"),
    ("text/plain", b"hello", "text/plain"),
    ("over 4 MiB", b'{"p": "' + b"x" * (4 * 1024 * 1024 + 10) + b'"}', "application/json"),
]


def _client(world: World, credentials: str) -> httpx.Client:
    if credentials == "none":
        return world.api()
    if credentials == "wrong grant":
        return world.api("zcli_" + "0" * 43)
    # The console host with a session cookie that names no session.
    return httpx.Client(base_url=world.router.url, timeout=10, headers={
        "host": f"console.localhost:{world.router.port}", "x-csrf-token": "x" * 32,
        "cookie": "svc_console=" + "0" * 43})


@pytest.mark.parametrize("credentials", ["none", "wrong grant", "wrong session"])
def test_without_valid_credentials_every_body_gets_the_same_401(
        world: World, credentials: str) -> None:
    endpoints = ENDPOINTS + ([("POST", f"{P}/cli/approve")]
                             if credentials == "wrong session" else [])
    with _client(world, credentials) as api:
        expected = api.get(f"{P}/me")
        assert expected.status_code == 401
        code = expected.json()["code"]
        failures = []
        for method, path in endpoints:
            for name, content, media in BODIES:
                try:
                    answer = api.request(method, path, content=content,
                                         headers={"content-type": media})
                except httpx.RemoteProtocolError:  # an oversized body may be cut off early
                    failures.append(f"{method} {path} {name}: connection dropped")
                    continue
                if answer.status_code != 401 or answer.json().get("code") != code:
                    failures.append(f"{method} {path} {name}: {answer.status_code} "
                                    f"{answer.text[:120]}")
    assert not failures, "\n".join(failures)
