"""``svc keys create`` sends an idempotency key on every run (``--idempotency``, else a new
one), so its own retry after a lost answer makes no second key, and a rerun with the key
finds the key made instead of making another. The real ``svc`` against a real router;
lost answers through the loopback proxy of the SDK tests (a dropped connection)."""

from __future__ import annotations

import json
import subprocess

from sqlalchemy import func, select

from payments.developer.models import ApiKey
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
