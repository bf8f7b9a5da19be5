"""``svc keys create`` sends an idempotency key on every run (``--idempotency``, else a new
one), so its own retry after a lost answer makes no second key, and a rerun with the key
finds the key made instead of making another. The real ``svc`` against a real router;
lost answers through the loopback proxy of the SDK tests (a dropped connection), and a
gateway's 429 from that proxy. Its retries are the SDK's policy (svc.backend_errors)."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest
from sqlalchemy import func, select

from payments.developer.models import ApiKey
from svc.client import ApiFailure, DeveloperClient
from svc.commands import key_create
from tests.sdk.proxy import running_proxy
from tests.support.cli_grant import save_grant
from tests.svc.test_cli_end_to_end import SVC, World
from tests.svc.test_cli_groups import ok, refused, signed_in


def _keys(world: World) -> int:
    with world.sessions() as session:
        return session.scalar(select(func.count()).select_from(ApiKey)) or 0


def test_every_run_is_one_key_and_a_rerun_with_its_key_shows_no_secret(world: World) -> None:
    signed_in(world, "apps:read,keys:create")
    first, second = ok(world, "keys", "create"), ok(world, "keys", "create")
    assert first["idempotencyKey"].startswith("svc-cli:keys:")
    assert first["idempotencyKey"] != second["idempotencyKey"]  # a new one per run
    assert _keys(world) == 2

    made = ok(world, "keys", "create", "--label", "ci", "--idempotency", "deploy-42")
    assert made["idempotencyKey"] == "deploy-42"
    key, secret = made["key"], made["secret"]
    again = refused(world, "keys", "create", "--label", "ci", "--idempotency", "deploy-42",
                    exit_code=1)
    assert again["code"] == "key_already_created"
    assert key["id"] in again["message"] and key["preview"] in again["message"]
    assert "earlier run" in again["message"] and "shown once" in again["message"]
    assert again["command"] == f"svc keys revoke {key['id']} --app game --yes"
    assert secret not in json.dumps(again)
    other = refused(world, "keys", "create", "--label", "other", "--idempotency",
                    "deploy-42", exit_code=1)
    assert other["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert refused(world, "keys", "create", "--idempotency", "x" * 201,
                   exit_code=2)["code"] == "usage"
    assert _keys(world) == 3


def test_a_lost_answer_is_retried_under_the_same_key_and_makes_one_key(world: World) -> None:
    with running_proxy(world.port, lambda n, request, answer: None if n == 0 else answer
                       ) as proxy:
        save_grant(world.sessions, world.developer_id, "game", "apps:read,keys:create",
                   world.config, proxy.url)
        done = subprocess.run([SVC, "keys", "create", "--label", "ci", "--api-url", proxy.url],
                              cwd=world.home, env=world.env(), text=True, capture_output=True,
                              stdin=subprocess.DEVNULL, timeout=60, check=False)
        assert done.returncode == 1, (done.stdout, done.stderr)
        # The first request made the key; its answer, with the secret, was dropped.
        assert proxy.statuses == [201, 409]
        sent = [json.loads(body)["idempotencyKey"] for body in proxy.bodies]
        assert sent[0] == sent[1] and sent[0].startswith("svc-cli:keys:")
    assert _keys(world) == 1
    with world.sessions() as session:
        key = session.scalars(select(ApiKey)).one()
    assert f"The API key {key.id} ({key.preview}) was already created" in done.stderr
    assert "earlier attempt of this run, whose answer was lost" in done.stderr
    assert f"svc keys revoke {key.id} --app game --yes" in done.stderr
    assert "zpk_test_" not in done.stderr.replace(key.preview, "") and done.stdout == ""


def test_no_answer_at_all_names_the_key_to_rerun_with(world: World) -> None:
    with running_proxy(world.port, lambda n, request, answer: None) as proxy:
        save_grant(world.sessions, world.developer_id, "game", "apps:read,keys:create",
                   world.config, proxy.url)
        done = subprocess.run([SVC, "keys", "create", "--label", "my ci", "--scopes",
                               "orders:read", "--api-url", proxy.url, "--json"],
                              cwd=world.home, env=world.env(), text=True, capture_output=True,
                              stdin=subprocess.DEVNULL, timeout=60, check=False)
        assert done.returncode == 5, (done.stdout, done.stderr)
        sent = {json.loads(body)["idempotencyKey"] for body in proxy.bodies}
        assert len(proxy.bodies) == 3 and len(sent) == 1  # three attempts, one key
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "unreachable" and "may have been created" in error["message"]
    assert error["command"] == ("svc keys create --app game --label 'my ci' --env test "
                                f"--scopes orders:read --idempotency {sent.pop()}")
    assert _keys(world) == 1  # each attempt reached the service; one key was made


def rate_limited(retry_after: int) -> bytes:
    """A 429 in the service's envelope, with Retry-After, as its rate limits answer."""
    body = json.dumps({"code": "rate_limited", "message": "Too many requests.",
                       "retryAfter": retry_after}).encode()
    return (f"HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n"
            f"retry-after: {retry_after}\r\ncontent-length: {len(body)}\r\n"
            "connection: close\r\n\r\n").encode() + body


def test_a_429_is_retried_after_its_retry_after_and_makes_one_key(world: World) -> None:
    sent_at: list[float] = []

    def gateway(n: int, request: bytes) -> bytes | None:
        sent_at.append(time.monotonic())
        return rate_limited(2) if n == 0 else None  # the first never reaches the service

    with running_proxy(world.port, in_front=gateway) as proxy:
        save_grant(world.sessions, world.developer_id, "game", "apps:read,keys:create",
                   world.config, proxy.url)
        done = subprocess.run([SVC, "keys", "create", "--label", "ci", "--api-url", proxy.url,
                               "--json"], cwd=world.home, env=world.env(), text=True,
                              capture_output=True, stdin=subprocess.DEVNULL, timeout=60,
                              check=False)
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert proxy.statuses == [429, 201]
        sent = [json.loads(body)["idempotencyKey"] for body in proxy.bodies]
    assert sent[0] == sent[1]
    assert sent_at[1] - sent_at[0] >= 1.9  # the Retry-After, not the 0.2 s backoff
    created = json.loads(done.stdout)
    with world.sessions() as session:
        key = session.scalars(select(ApiKey)).one()  # one key
    assert created["key"]["id"] == key.id and created["idempotencyKey"] == sent[0]
    assert created["secret"].startswith("zpk_test_")


class Refusing(DeveloperClient):
    """Answers every call with ``failure``, and counts the calls."""

    def __init__(self, failure: ApiFailure) -> None:
        super().__init__("http://127.0.0.1:9")
        self.failure = failure
        self.calls = 0

    def __enter__(self) -> Refusing:
        return self

    def call(self, method: str, path: str, body: dict[str, Any] | None = None
             ) -> dict[str, Any]:
        self.calls += 1
        raise self.failure


def test_retry_after_is_honoured_up_to_the_policys_cap_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)  # key_create sleeps through time.sleep
    body = {"label": "", "environment": "test", "idempotencyKey": "k-1"}
    hour = ApiFailure(429, {"code": "rate_limited", "message": "Slow down."},
                      retry_after=3600)
    with Refusing(hour) as client, pytest.raises(ApiFailure) as failed:
        key_create.create_once(client, "game", body)
    assert failed.value is hour and client.calls == 3 and waits == [5.0, 5.0]
    waits.clear()
    refused = ApiFailure(422, {"code": "invalid_scope", "message": "No."})
    with Refusing(refused) as client, pytest.raises(ApiFailure):
        key_create.create_once(client, "game", body)
    assert client.calls == 1 and waits == []  # a refusal is not retried
