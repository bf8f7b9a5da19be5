"""Which requests of a run count as "may have changed something" (svc/sent.py), through the
real clients over in-memory transports: reads, a plan and a sign-in request never; a
request that never connected or that the service refused (4xx) not; anything else yes."""

from __future__ import annotations

from contextlib import suppress

import httpx
import pytest

from svc.backend import BackendClient, BackendError
from svc.client import ApiFailure, DeveloperClient, ServiceUnreachable
from svc.sent import INTERRUPTED, UNKNOWN, interrupted, recording


def answering(status: int) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(status, json={"code": "x"}))


def refusing_to_connect(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def run(transport: httpx.BaseTransport, method: str, path: str,
        body: dict[str, object] | None = None) -> tuple[str, str, str | None]:
    client = DeveloperClient("http://api.test", "t", transport=transport)
    # The answer does not matter (a refusal raises), what was sent does.
    with recording() as sent, client, suppress(ApiFailure, ServiceUnreachable):
        client.call(method, path, body)
    error = interrupted(sent)
    return error.code, error.message, error.command


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/apps/game/keys"), ("POST", "/config/plan"), ("POST", "/cli/auth-requests")])
def test_what_writes_nothing_leaves_nothing_changed(method: str, path: str) -> None:
    code, message, command = run(answering(200), method, path, {"config": {}})
    assert (code, message, command) == (INTERRUPTED, "Interrupted; nothing was changed.", None)


def test_a_request_that_never_connected_or_was_refused_changed_nothing() -> None:
    assert run(httpx.MockTransport(refusing_to_connect), "POST", "/apps/game/keys")[0] == \
        INTERRUPTED
    assert run(answering(409), "POST", "/apps/game/keys")[0] == INTERRUPTED
    assert run(answering(500), "POST", "/apps/game/keys")[0] == UNKNOWN


@pytest.mark.parametrize(("method", "path", "body", "check"), [
    ("POST", "/config/apply", {"config": {"app": {"slug": "arcade"}}},
     "svc config revisions --app arcade"),
    ("POST", "/config/rollback", {"revision": "zcfgrev_1"}, "svc config revisions"),
    ("POST", "/apps/game/keys", {"idempotencyKey": "k 1"}, "svc keys list --app game"),
    ("PATCH", "/apps/game/products/retry", {}, "svc product list --app game"),
    ("POST", "/apps/game/webhooks/zwh_1/rotate", {}, "svc webhook list --app game"),
    ("POST", "/apps/game/webhooks/zwh_1/test", {}, "svc webhook attempts --app game"),
    ("POST", "/apps/game/runtime/disable", {}, "svc runtime status --app game"),
    ("POST", "/apps", {"slug": "new-game"}, "svc app show --app new-game"),
    ("DELETE", "/cli/grant", None, "svc auth status"),
])
def test_a_change_sent_names_the_command_that_shows_it(
        method: str, path: str, body: dict[str, object] | None, check: str) -> None:
    code, message, command = run(answering(201), method, path, body)
    assert (code, command) == (UNKNOWN, check)
    assert f"Interrupted after sending {method} /api/developer{path}:" in message
    assert f"Check with `{check}`" in message and "nothing was changed" not in message
    if body and "idempotencyKey" in body:
        assert "--idempotency 'k 1'" in message


def test_the_backend_client_counts_too() -> None:
    backend = BackendClient("http://api.test", "zpk_test_x", retries=0,
                            transport=answering(201))
    # A 201 without an order in it: no Order, but the request was sent.
    with recording() as sent, backend, suppress(BackendError, ValueError, KeyError):
        backend.create_order(product_id="zprod_1", developer_user_id="u1",
                             idempotency_key="order-1", amount_atomic=None)
    error = interrupted(sent)
    assert error.code == UNKNOWN and "POST /api/orders" in error.message
    assert "--idempotency order-1" in error.message
    assert "Check the app before running the command again." in error.message


def test_outside_a_run_nothing_is_recorded() -> None:
    with DeveloperClient("http://api.test", "t", transport=answering(201)) as client:
        client.call("POST", "/apps/game/keys", {})  # no recording(): the SDK in a server
