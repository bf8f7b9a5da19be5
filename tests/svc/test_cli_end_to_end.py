"""The real ``svc`` executable against a real router, on SQLite and PostgreSQL.

The router tells hosts apart by ``Host``; ``api.localhost`` does not resolve on every
machine, so the service under test takes ``http://127.0.0.1:PORT`` as its API origin
and the CLI is pointed at exactly that. Approvals go to the console host the way the
console's own page sends them: session cookie plus CSRF header.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction, utcnow
from payments.developer.models import CliGrant
from tests.factories import open_console_session

SVC = str(Path(sys.executable).with_name("svc"))
REPO = Path(__file__).resolve().parents[2]


@dataclass
class World:
    url: str  # the API origin, http://127.0.0.1:PORT
    port: int
    sessions: sessionmaker[Session]
    developer_id: str
    home: Path

    @property
    def config(self) -> Path:
        return self.home / "config"

    @property
    def grant_file(self) -> Path:
        return self.config / "grant.json"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("SVC_API_URL", "BROWSER")}
        # PYTHONPATH: the `svc` script of an editable install may import another checkout.
        return {**env, "SVC_CONFIG_DIR": str(self.config), "PYTHONPATH": str(REPO)}

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen([SVC, *args, "--api-url", self.url], cwd=self.home,
                                env=env or self.env(), text=True, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)

    def svc(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([SVC, *args, "--api-url", self.url], cwd=self.home,
                              env=self.env(), text=True, capture_output=True, timeout=60,
                              check=False)

    def answer(self, user_code: str, decision: str = "approve") -> None:
        cookie, csrf = open_console_session(self.sessions, self.developer_id)
        with httpx.Client(base_url=self.url, timeout=10, headers={
                "host": f"console.localhost:{self.port}", "x-csrf-token": csrf,
                "cookie": f"svc_console={cookie}"}) as console:
            response = console.post("/api/developer/cli/approve",
                                    json={"userCode": user_code, "decision": decision})
        assert response.status_code == 200, response.text

    def sign_in(self, scopes: str, decision: str = "approve") -> subprocess.CompletedProcess[str]:
        """``svc auth device --json``: read the code it prints, answer it, let it finish."""
        cli = self.start("auth", "device", "--app", "game", "--scopes", scopes, "--ttl", "2h",
                         "--json")
        assert cli.stdout is not None
        pending = json.loads(cli.stdout.readline())
        assert pending["event"] == "pending" and pending["app"] == "game"
        assert pending["scopes"] == scopes.split(",") and pending["ttlSeconds"] == 7200
        assert "deviceCode" not in pending  # the polling secret stays in the CLI
        self.answer(pending["userCode"], decision)
        out, err = cli.communicate(timeout=60)
        return subprocess.CompletedProcess(cli.args, cli.returncode, out, err)

    def token(self) -> str:
        token: str = json.loads(self.grant_file.read_text())["token"]
        return token


def last_json(text: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(text.strip().splitlines()[-1])
    return body


def test_device_sign_in_then_scoped_commands(world: World) -> None:
    done = world.sign_in("apps:read")
    assert done.returncode == 0, done.stderr
    signed_in = last_json(done.stdout)
    assert signed_in["event"] == "signed_in"
    assert signed_in["grant"]["app"] == "game" and signed_in["grant"]["scopes"] == ["apps:read"]
    assert stat.S_IMODE(world.grant_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(world.config.stat().st_mode) == 0o700
    token = world.token()
    assert token.startswith("zcli_") and token not in done.stdout + done.stderr

    status = world.svc("auth", "status", "--json")
    assert status.returncode == 0, status.stderr
    grant = json.loads(status.stdout)["grant"]
    assert (grant["app"], grant["scopes"]) == ("game", ["apps:read"])
    assert grant["token"] == f"zcli_…{token[-4:]}" and token not in status.stdout

    text = world.svc("auth", "status")
    assert "app:     game" in text.stdout and token not in text.stdout
    assert f"  token:   zcli_…{token[-4:]}\n" in text.stdout

    shown = world.svc("app", "show", "--app", "game", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["app"]["slug"] == "game"
    keys = world.svc("keys", "list")  # the grant's app when --app is not given
    assert (keys.returncode, keys.stdout.strip()) == (0, "No API keys on game.")


def test_missing_scope_prints_the_sign_in_to_rerun(world: World) -> None:
    assert world.sign_in("keys:create").returncode == 0
    rerun = "svc auth browser --app game --scopes apps:read,keys:create"
    shown = world.svc("app", "show", "--app", "game")
    assert shown.returncode == 3
    assert "lacks the scope 'apps:read'" in shown.stderr
    assert f"\n  {rerun}\n" in shown.stderr
    as_json = world.svc("keys", "list", "--json")
    assert as_json.returncode == 3
    error = json.loads(as_json.stdout)["error"]
    assert (error["code"], error["command"]) == ("developer_cli_scope_missing", rerun)


def test_denied_sign_in_stores_nothing(world: World) -> None:
    done = world.sign_in("apps:read", decision="deny")
    assert done.returncode == 1
    assert last_json(done.stdout)["error"]["code"] == "access_denied"
    assert "denied" in last_json(done.stdout)["error"]["message"]
    assert not world.grant_file.exists()


def test_expired_grant_asks_to_sign_in_again(world: World) -> None:
    assert world.sign_in("apps:read").returncode == 0
    with transaction(world.sessions) as session:
        session.execute(update(CliGrant).values(expires_at=utcnow() - timedelta(seconds=1)))
    shown = world.svc("app", "show")
    assert shown.returncode == 4
    assert "expired" in shown.stderr and "svc auth browser" in shown.stderr
    status = world.svc("auth", "status")
    assert status.returncode == 1 and "svc auth browser" in status.stderr


def test_revoke_ends_the_grant_on_the_service(world: World) -> None:
    assert world.sign_in("apps:read").returncode == 0
    token = world.token()
    revoked = world.svc("auth", "revoke", "--json")
    assert revoked.returncode == 0, revoked.stderr
    assert json.loads(revoked.stdout)["revoked"] is True
    assert not world.grant_file.exists()
    with httpx.Client(base_url=world.url, timeout=10,
                      headers={"authorization": f"Bearer {token}"}) as api:
        refused = api.get("/api/developer/cli/grant")
    assert refused.status_code == 401
    assert world.svc("app", "show").returncode == 4


def test_browser_sign_in_opens_the_approval_page(world: World) -> None:
    opened = world.home / "opened.txt"
    browser = world.home / "fake-browser"
    browser.write_text(f"#!{sys.executable}\nimport sys\n"
                       f"open({str(opened)!r}, 'w').write(sys.argv[1])\n")
    browser.chmod(0o700)
    cli = world.start("auth", "browser", "--app", "game",
                      env={**world.env(), "BROWSER": str(browser)})
    assert cli.stdout is not None
    assert cli.stdout.readline().strip() == "Opened in your browser:"
    url = cli.stdout.readline().strip()
    assert url == opened.read_text()
    assert url.startswith(f"http://console.localhost:{world.port}/cli/approve?code=")
    world.answer(url.rsplit("=", 1)[1])
    out, err = cli.communicate(timeout=60)
    assert cli.returncode == 0, err
    assert "Signed in: app game, scopes apps:read" in out
    logout = world.svc("auth", "logout")
    assert (logout.returncode, logout.stdout.strip()) == (
        0, "Signed out; the grant was revoked on the service.")
    assert not world.grant_file.exists()


def test_the_service_refusing_a_scope_is_a_usage_error(world: World) -> None:
    refused = world.svc("auth", "device", "--app", "game", "--scopes", "apps:read,settle")
    assert refused.returncode == 2
    assert "Unknown CLI grant scope(s): settle" in refused.stderr
    assert not world.grant_file.exists()
