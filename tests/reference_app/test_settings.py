"""``Settings.from_env``: the spec 4.11 variables (and the SDK's service URLs) are checked,
and a missing or malformed one stops the app naming the variable (exit code 2)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from examples.reference_app import Settings, SettingsError
from tests.support.services import free_port

GOOD = {
    "SVC_APP_ID": "zapp_0123456789abcdef", "SVC_APP_SLUG": "space-game",
    "SVC_PAY_TO": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    "SVC_RUNTIME_ORIGIN": "https://game.example.com", "SVC_RUNTIME_APP_PATH": "/play",
    "SVC_RETURN_URL": "https://space-game.apps.example.com/svc-auth-return?app=space-game",
    "SVC_WEBHOOK_SECRET": "zwhsec_" + "a1" * 32, "SVC_API_KEY": "zpk_" + "b2" * 24,
    "SVC_WEBHOOK_URL": "https://game.example.com/api/svc/webhook",
    "DATABASE_URL": "postgresql://app@db.example.com/game",
    "SVC_API_URL": "https://api.example.com", "SVC_PORTAL_URL": "https://portal.example.com",
}
REQUIRED = ["SVC_APP_ID", "SVC_APP_SLUG", "SVC_PAY_TO", "SVC_RUNTIME_ORIGIN",
            "SVC_RETURN_URL", "SVC_WEBHOOK_SECRET", "SVC_WEBHOOK_URL", "SVC_API_URL",
            "SVC_PORTAL_URL"]
MALFORMED = [
    ("SVC_APP_ID", "app_123"), ("SVC_APP_SLUG", "Space Game"), ("SVC_PAY_TO", "0x1234"),
    ("SVC_RUNTIME_ORIGIN", "https://game.example.com/play"),
    ("SVC_RUNTIME_ORIGIN", "ftp://game.example.com"), ("SVC_RUNTIME_APP_PATH", "play"),
    ("SVC_RUNTIME_APP_PATH", "//evil.example"), ("SVC_RUNTIME_APP_PATH", "/a/../b"),
    ("SVC_RETURN_URL", "not a url"), ("SVC_WEBHOOK_SECRET", "whsec_abc"),
    ("SVC_API_KEY", "sk_live_123"), ("SVC_WEBHOOK_URL", "javascript:alert(1)"),
    ("DATABASE_URL", "mysql://db/game"), ("DATABASE_URL", "::not a url::"),
    ("SVC_API_URL", "api.example.com"), ("SVC_PORTAL_URL", "https://portal.example.com/x"),
]


def test_good_environment_reads_every_variable() -> None:
    settings = Settings.from_env(GOOD)
    assert (settings.app_id, settings.app_slug, settings.runtime_app_path) == (
        "zapp_0123456789abcdef", "space-game", "/play")
    assert settings.service.modal_script_url == "https://portal.example.com/sdk/svc-modal.js"
    assert settings.database_url == GOOD["DATABASE_URL"]
    # secrets never show in the settings' repr (tracebacks, debug logs)
    assert GOOD["SVC_WEBHOOK_SECRET"] not in repr(settings)
    assert GOOD["SVC_API_KEY"] not in repr(settings)


def test_optional_variables_take_their_defaults() -> None:
    env = {k: v for k, v in GOOD.items()
           if k not in ("SVC_API_KEY", "DATABASE_URL", "SVC_RUNTIME_APP_PATH")}
    settings = Settings.from_env(env)
    assert settings.api_key is None
    assert settings.runtime_app_path == "/"
    assert settings.database_url.startswith("sqlite:///")


@pytest.mark.parametrize("name", REQUIRED)
def test_each_missing_variable_is_named(name: str) -> None:
    env = {k: v for k, v in GOOD.items() if k != name}
    with pytest.raises(SettingsError) as refused:
        Settings.from_env(env)
    assert len(refused.value.problems) == 1
    assert refused.value.problems[0].startswith(f"{name}: missing")


@pytest.mark.parametrize(("name", "example"), [
    ("SVC_API_URL", "https://api.example.com"), ("SVC_PORTAL_URL", "https://portal.example.com")])
def test_a_missing_service_url_gives_its_own_example(name: str, example: str) -> None:
    env = {k: v for k, v in GOOD.items() if k != name}
    with pytest.raises(SettingsError) as refused:
        Settings.from_env(env)
    assert refused.value.problems[0].endswith(f"e.g. {example}"), refused.value.problems


@pytest.mark.parametrize(("name", "value"), MALFORMED)
def test_each_malformed_variable_is_named(name: str, value: str) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({**GOOD, name: value})
    assert len(refused.value.problems) == 1, refused.value.problems
    problem = refused.value.problems[0]
    assert problem.startswith(f"{name}: ")
    if name in ("SVC_WEBHOOK_SECRET", "SVC_API_KEY"):
        assert value not in problem  # a secret-looking value is not echoed


def test_cli_refuses_to_start_with_exit_code_2_and_one_line_per_problem() -> None:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SVC_") and k != "DATABASE_URL"}
    env.update({k: v for k, v in GOOD.items() if k not in ("SVC_APP_ID", "SVC_PAY_TO")})
    env["SVC_APP_SLUG"] = "Not A Slug"
    done = subprocess.run([sys.executable, "-m", "examples.reference_app", "--port", "9"],
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert [line.split(":")[1].strip() for line in lines] == [
        "SVC_APP_ID", "SVC_APP_SLUG", "SVC_PAY_TO"], lines
    assert done.stdout == ""


def test_cli_serves_the_app_from_the_environment(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SVC_") and k != "DATABASE_URL"}
    env.update({**GOOD, "DATABASE_URL": f"sqlite:///{tmp_path / 'store.db'}"})
    server = subprocess.Popen([sys.executable, "-m", "examples.reference_app", "--host",
                               "127.0.0.1", "--port", str(port)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                manifest = httpx.get(f"http://127.0.0.1:{port}/.well-known/svc.json")
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        assert manifest.json()["appId"] == GOOD["SVC_APP_ID"]
        assert manifest.json()["appPath"] == "/play"
        assert (tmp_path / "store.db").exists()  # the schema was created at startup
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=15)
    for secret in (GOOD["SVC_WEBHOOK_SECRET"], GOOD["SVC_API_KEY"]):
        assert secret.encode() not in stderr  # not in the logs
