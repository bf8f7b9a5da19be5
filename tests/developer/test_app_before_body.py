"""The developer API finds what a path names before it judges a body: an app that does not
exist, or is another organization's, is 404 whatever was sent (a 422 would tell a stranger
which fields an endpoint of that app expects, and contradicts the 404 of a good body); so
is a product, key or webhook endpoint of the app that does not exist."""

from __future__ import annotations

import httpx
import pytest

from tests.developer.test_api import World
from tests.factories import add_developer, open_console_session

P = "/api/developer/apps"
# Every endpoint that takes a body and names an app in its path (config names its app in
# the body, so it is not here).
APP_ENDPOINTS = [
    ("PATCH", "{app}"), ("POST", "{app}/products"), ("PATCH", "{app}/products/retry"),
    ("POST", "{app}/keys"), ("PATCH", "{app}/keys/zkey_x"),
    ("POST", "{app}/webhooks"), ("PATCH", "{app}/webhooks/zwh_x"),
    ("POST", "{app}/runtime/configure"),
]
# Below an app that exists and may be used: the object the path names does not exist.
MISSING_OBJECTS = [
    ("PATCH", "game/products/nope", "product_not_found"),
    ("PATCH", "game/keys/zkey_nope", "key_not_found"),
    ("PATCH", "game/webhooks/zwh_nope", "webhook_not_found"),
]
BODIES: list[tuple[str, bytes, str]] = [
    ("empty JSON", b"{}", "application/json"),
    ("wrong types", b'{"name": 5, "url": [], "origin": 1, "enabled": "yes", "scopes": 1, '
                    b'"priceAtomic": "0"}', "application/json"),
    ("not JSON", b"{", "application/json"),
    ("text/plain", b"hello", "text/plain"),
]


def _session(world: World, developer_id: str) -> httpx.Client:
    cookie, csrf = open_console_session(world.sessions, developer_id)
    return httpx.Client(base_url=world.router.url, timeout=10, headers={
        "host": f"console.localhost:{world.router.port}", "x-csrf-token": csrf,
        "cookie": f"svc_console={cookie}"})


def _refusals(client: httpx.Client, requests: list[tuple[str, str, str]]) -> list[str]:
    """Each (method, path, code) sent with every bad body; what did not answer 404 code."""
    failures = []
    for method, path, code in requests:
        for name, content, media in BODIES:
            answer = client.request(method, f"{P}/{path}", content=content,
                                    headers={"content-type": media})
            if answer.status_code != 404 or answer.json().get("code") != code:
                failures.append(f"{method} {path} {name}: {answer.status_code} "
                                f"{answer.text[:120]}")
    return failures


@pytest.mark.parametrize("caller", ["stranger's session", "own session", "grant"])
def test_an_app_out_of_reach_is_404_whatever_the_body(world: World, caller: str) -> None:
    if caller == "stranger's session":  # "game" is another organization's
        stranger, _ = add_developer(world.sessions, "stranger")
        client, app = _session(world, stranger), "game"
    elif caller == "own session":
        client, app = _session(world, world.developer_id), "nope"
    else:
        token = world.grant("game", ["apps:read", "apps:write", "products:write",
                                     "keys:create", "webhooks:write", "runtime:write"])
        client, app = world.api(token), "nope"
    with client:
        failures = _refusals(client, [(method, path.format(app=app), "app_not_found")
                                      for method, path in APP_ENDPOINTS])
    assert not failures, "\n".join(failures)


def test_a_missing_object_of_the_app_is_404_whatever_the_body(world: World) -> None:
    with _session(world, world.developer_id) as client:
        failures = _refusals(client, MISSING_OBJECTS)
    assert not failures, "\n".join(failures)


def test_an_app_out_of_reach_is_404_whatever_the_query(world: World) -> None:
    """The same for a query: the attempts list's ``before`` and ``limit`` are read once the
    app is found, so a stranger's bad cursor on another organization's app is 404."""
    stranger, _ = add_developer(world.sessions, "stranger")
    bad = [("before", "not-a-cursor"), ("limit", "\u0665"), ("status", "nope")]
    with _session(world, stranger) as client:
        for name, value in bad:
            answer = client.get(f"{P}/game/webhook-attempts", params={name: value})
            assert (answer.status_code, answer.json()["code"]) == (404, "app_not_found"), name
    with _session(world, world.developer_id) as client:  # the owner is told what is wrong
        for name, value in bad:
            answer = client.get(f"{P}/game/webhook-attempts", params={name: value})
            assert answer.status_code == 422, (name, answer.text)


def test_a_missing_organization_key_is_404_whatever_the_body(world: World) -> None:
    with _session(world, world.developer_id) as client:
        for name, content, media in BODIES:
            answer = client.patch("/api/developer/keys/zkey_nope", content=content,
                                  headers={"content-type": media})
            assert (answer.status_code, answer.json().get("code")) == (404, "key_not_found"), \
                (name, answer.text[:200])
