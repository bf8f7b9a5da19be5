"""``svc-ops`` checks the settings its commands use, refuses to fall back on the dev SQLite
file in production, and says when a decision was not published to the servers (deploy
walk 25, findings 7, 8 and 15)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from ops.cli import main
from payments.db import make_engine, make_sessionmaker
from tests.factories import add_developer, add_owned_app

Ops = Callable[..., tuple[int, str, str]]
# The image's own environment (Dockerfile) plus what the servers' block adds.
IMAGE = {"SVCSRV_MODE": "production", "SVCSRV_BIND_HOST": "0.0.0.0",
         "SVCSRV_BIND_PORT": "8000"}
KEY = "0x" + "5a" * 31  # 31 bytes: a key pasted short


@pytest.fixture
def ops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> Ops:
    """``svc-ops ARGS`` in this process, with only ``env``'s SVCSRV_* variables, in tmp_path."""
    def run(env: dict[str, str], *args: str) -> tuple[int, str, str]:
        with monkeypatch.context() as patch:
            for key in [k for k in os.environ if k.startswith("SVCSRV_")]:
                patch.delenv(key)
            for key, value in env.items():
                patch.setenv(key, value)
            patch.setenv("USER", "opsuser")
            patch.chdir(tmp_path)
            code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err
    return run


@pytest.fixture
def database(sqlite_template: Path, tmp_path: Path) -> str:
    """A migrated SQLite database with the app ``game``."""
    path = tmp_path / "ops.db"
    shutil.copy(sqlite_template, path)
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    _, org_id = add_developer(sessions)
    add_owned_app(sessions, org_id, "game")
    engine.dispose()
    return url


def test_migrate_in_production_needs_only_the_database_url(ops: Ops, tmp_path: Path) -> None:
    """deploy.md's `podman run -e SVCSRV_DATABASE_URL=... svc-server svc-ops migrate`: the
    image says production; no https URLs, mail or secret key are asked of svc-ops, nor does
    the servers' SVCSRV_PROCESSES=2 (without Redis) stop it."""
    env = {**IMAGE, "SVCSRV_DATABASE_URL": f"sqlite:///{tmp_path / 'fresh.db'}",
           "SVCSRV_PROCESSES": "2"}
    code, out, err = ops(env, "migrate")
    assert code == 0, err
    current, head = out.split()
    assert current.removeprefix("current=") == head.removeprefix("head=")
    assert err == ""


def test_no_database_url_is_refused_in_production_and_said_in_dev(
        ops: Ops, tmp_path: Path) -> None:
    code, out, err = ops(IMAGE, "migrate")
    assert code == 2 and out == ""
    assert err.startswith("svc-ops: set SVCSRV_DATABASE_URL in production")
    assert not (tmp_path / "var").exists()  # no SQLite file made in the working directory

    code, out, err = ops({}, "db-revision")  # dev: works, and says on which file
    assert code == 0
    assert f"using the SQLite database {tmp_path / 'var' / 'svc.db'}" in err
    assert "SVCSRV_DATABASE_URL is unset" in err


def test_webhooks_run_in_production_needs_the_secret_key(ops: Ops, database: str) -> None:
    """It opens the sealed signing secrets: the one operator command that needs the key."""
    code, _, err = ops({**IMAGE, "SVCSRV_DATABASE_URL": database}, "webhooks", "run")
    assert code == 2 and "SVCSRV_SECRET_KEY" in err


def test_a_malformed_value_is_one_sentence_naming_the_variable(ops: Ops, database: str) -> None:
    """Was a traceback from eth-account at the first chain command; the key is not shown."""
    env = {"SVCSRV_DATABASE_URL": database, "SVCSRV_CHAIN_BACKEND": "json_rpc",
           "SVCSRV_CHAIN_RPC_URL": "http://127.0.0.1:1", "SVCSRV_RELAYER_KEY": KEY,
           "SVCSRV_SPENDER_ADDRESS": "0x" + "11" * 20}
    code, _, err = ops(env, "chain", "status")
    assert code == 2
    assert err.startswith("svc-ops: SVCSRV_RELAYER_KEY must be a private key")
    assert err.count("\n") == 1 and KEY.removeprefix("0x")[:16] not in err
    code, _, err = ops({**env, "SVCSRV_RELAYER_KEY": "", "SVCSRV_DATABASE_URL": "garbage"},
                       "chain", "findings")
    assert code == 2 and err.startswith("svc-ops: SVCSRV_DATABASE_URL is not a database URL")


def test_a_decision_without_redis_says_it_was_not_published(ops: Ops, database: str) -> None:
    """Servers with Redis cache an app 60 s: a kill switch svc-ops does not publish takes
    that long to reach them (21.6 s in the walk)."""
    code, out, err = ops({"SVCSRV_DATABASE_URL": database}, "kill-switch", "on", "game",
                         "--reason", "abuse report")
    assert code == 0 and "kill switch on for game" in out
    assert "the change to game is recorded but not published" in err
    assert "SVCSRV_REDIS_URL is unset" in err and "up to 60 s on a server with Redis" in err
    code, _, err = ops({"SVCSRV_DATABASE_URL": database, "SVCSRV_APP_CACHE_TTL_SHARED": "30"},
                       "kill-switch", "off", "game")
    assert code == 0 and "up to 30 s" in err


def test_a_decision_redis_does_not_take_is_recorded_and_said(ops: Ops, database: str) -> None:
    """Committed before publishing: a Redis that is down is a warning, not a traceback that
    reads as if nothing happened. The URL (it may hold a password) is not repeated."""
    url = "redis://:redis-pass-9@127.0.0.1:1/0"
    code, out, err = ops({"SVCSRV_DATABASE_URL": database, "SVCSRV_REDIS_URL": url},
                         "kill-switch", "on", "game", "--reason", "abuse report")
    assert code == 0 and "kill switch on for game" in out
    assert "not published to the servers (Redis did not take it (ConnectionError))" in err
    assert "redis-pass-9" not in err
    assert ops({"SVCSRV_DATABASE_URL": database}, "kill-switch", "list")[1].startswith("game\t")


def test_a_published_decision_says_nothing_more(ops: Ops, database: str,
                                                redis_url: str) -> None:
    code, _, err = ops({"SVCSRV_DATABASE_URL": database, "SVCSRV_REDIS_URL": redis_url},
                       "kill-switch", "on", "game", "--reason", "abuse report")
    assert (code, err) == (0, "")
