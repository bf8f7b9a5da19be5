"""Polling ``cli/token`` against scripted answers (no clock, no network)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from svc.client import ApiFailure, DeveloperClient, ServiceUnreachable
from svc.device_flow import PendingSignIn, wait_for_grant
from svc.errors import CliError

PENDING = PendingSignIn(device_code="secret-device-code", user_code="ABCD-EFGH",
                        verification_uri="http://console/device",
                        verification_uri_complete="http://console/cli/approve?code=ABCD-EFGH",
                        expires_in=600, interval=2, app="game", scopes=("apps:read",),
                        ttl_seconds=7200)
ISSUED = {"token": "zcli_" + "a" * 64, "grant": {
    "id": "zclig_1", "app": "game", "appId": "zapp_1", "scopes": ["apps:read"],
    "expiresAt": "2030-01-01T00:00:00+00:00", "revokedAt": None}}


def error(status: int, code: str) -> httpx.Response:
    return httpx.Response(status, json={"code": code, "message": f"{code} happened"})


class Script:
    """Answers ``cli/token`` from a list; records each request and each sleep."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers: Iterator[httpx.Response | Exception] = iter(answers)
        self.bodies: list[dict[str, Any]] = []
        self.sleeps: list[float] = []
        self.now = 0.0

    def handle(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/developer/cli/token"
        self.bodies.append(json.loads(request.content))
        answer = next(self.answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def run(self, pending: PendingSignIn = PENDING) -> Any:
        client = DeveloperClient("http://api.test", transport=httpx.MockTransport(self.handle))
        with client:
            return wait_for_grant(client, pending, sleep=self.sleep, clock=lambda: self.now)


def test_polls_at_the_interval_until_approved() -> None:
    script = Script(error(400, "authorization_pending"), error(400, "authorization_pending"),
                    httpx.Response(200, json=ISSUED))
    grant = script.run()
    assert grant.token == ISSUED["token"] and grant.app == "game"
    assert grant.api_url == "http://api.test" and grant.scopes == ("apps:read",)
    assert script.sleeps == [2, 2, 2]
    assert script.bodies == [{"deviceCode": "secret-device-code"}] * 3


def test_slow_down_widens_the_interval() -> None:
    script = Script(error(400, "slow_down"), httpx.Response(200, json=ISSUED))
    script.run()
    assert script.sleeps == [2, 7]


def test_denied_and_expired_stop_with_a_sentence() -> None:
    with pytest.raises(CliError, match="denied"):
        Script(error(403, "access_denied")).run()
    with pytest.raises(CliError, match="expired") as caught:
        Script(error(410, "expired_token")).run()
    assert caught.value.exit_code == 1


def test_a_denial_of_a_named_app_says_how_to_name_another() -> None:
    """The console offers only Deny for an app the organization lacks; the CLI says so."""
    with pytest.raises(CliError) as named:
        Script(error(403, "access_denied")).run()
    assert "there is no app 'game' in your organization" in str(named.value)
    assert "--app" in str(named.value)
    unnamed = PendingSignIn(**{**PENDING.__dict__, "app": None})
    with pytest.raises(CliError) as plain:
        Script(error(403, "access_denied")).run(unnamed)
    assert str(plain.value) == "The sign-in was denied in the console; nothing was stored."


def test_gives_up_when_the_request_lifetime_is_over() -> None:
    short = PendingSignIn(**{**PENDING.__dict__, "expires_in": 5})
    script = Script(*[error(400, "authorization_pending")] * 10)
    with pytest.raises(CliError, match="expired"):
        script.run(short)
    assert script.sleeps == [2, 2, 2]


def test_other_errors_pass_through() -> None:
    with pytest.raises(ApiFailure) as caught:
        Script(error(400, "invalid_device_code")).run()
    assert caught.value.code == "invalid_device_code"


def test_tolerates_a_brief_outage_but_not_a_long_one() -> None:
    down = httpx.ConnectError("refused")
    Script(down, down, httpx.Response(200, json=ISSUED)).run()
    with pytest.raises(ServiceUnreachable):
        Script(down, down, down).run()
