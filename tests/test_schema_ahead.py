"""A schema ahead of this code (a newer version's migration: the rolling upgrade's window, a
rollback) is run on and reported ``schema_ahead``; one behind it is refused, as before.
"Ahead" is simulated by stamping a revision id this code has no script for."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text

from ops import cli
from payments import migrate
from payments.db import make_engine
from router.app import open_resources
from router.resources import Resources
from tests.router.conftest import RouterFactory
from tests.support.router import router_settings

NEWER = "0999_newer_release"
PRODUCTION: dict[str, Any] = {
    "mode": "production", "allow_private_origins": False,
    "base_url": "https://api.example.com", "portal_url": "https://portal.example.com",
    "console_url": "https://console.example.com", "docs_url": "https://docs.example.com",
    "apps_scheme": "https", "smtp_host": "127.0.0.1", "secret_key": "k" * 40}


def stamp(engine: Engine, revision: str) -> None:
    """Write the version row as a migration would, without its DDL (only the id matters)."""
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": revision})


@pytest.fixture
def engine(db_url: str) -> Any:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


def test_schema_states(engine: Engine) -> None:
    head = migrate.head_revision(engine)
    assert migrate.schema_of(engine).state is migrate.SchemaState.CURRENT
    stamp(engine, "0014")
    behind = migrate.schema_of(engine)
    assert (behind.state, behind.usable) == (migrate.SchemaState.BEHIND, False)
    with pytest.raises(migrate.SchemaBehind, match=r"behind this code's .*svc-ops migrate"):
        migrate.require_usable(engine)
    stamp(engine, NEWER)
    ahead = migrate.require_usable(engine)
    assert (ahead.state, ahead.current, ahead.head) == (migrate.SchemaState.AHEAD, NEWER, head)
    assert "newer version's migration" in ahead.describe()
    # Dev's upgrade at start leaves a newer schema alone instead of failing in alembic.
    assert migrate.upgrade_unless_ahead(engine).state is migrate.SchemaState.AHEAD


def test_production_server_runs_on_a_newer_schema_and_statusz_says_so(
        start_router: RouterFactory, db_url: str) -> None:
    engine = make_engine(db_url)
    stamp(engine, NEWER)
    engine.dispose()
    with start_router(**PRODUCTION) as router:
        status = httpx.get(router.url + "/statusz", headers={"host": "api.example.com"},
                           timeout=10)
    database = status.json()["checks"]["database"]
    assert database["status"] == "ok"
    assert database["schema"] == "schema_ahead"
    assert database["revision"] == NEWER
    assert database["head"] == migrate.head_revision(make_engine(db_url))
    assert "do not know" in database["detail"]


def test_statusz_reports_a_schema_behind(start_router: RouterFactory, db_url: str) -> None:
    # Dev migrates at start, so the schema falls behind while the server runs.
    with start_router() as router:
        engine = make_engine(db_url)
        stamp(engine, "0014")
        engine.dispose()
        status = httpx.get(router.url + "/statusz",
                           headers={"host": f"api.localhost:{router.port}"}, timeout=10)
    assert status.status_code == 503
    database = status.json()["checks"]["database"]
    assert (database["status"], database["schema"]) == ("migrations_pending",
                                                        "migrations_pending")
    assert database["revision"] == "0014"


def test_production_server_refuses_a_schema_behind(db_url: str) -> None:
    engine = make_engine(db_url)
    stamp(engine, "0014")
    engine.dispose()

    async def start() -> None:
        async with open_resources(router_settings(db_url, **PRODUCTION), Resources()):
            pass

    with pytest.raises(migrate.SchemaBehind, match="at 0014, behind"):
        asyncio.run(start())


def _ops(monkeypatch: pytest.MonkeyPatch, db_url: str, *argv: str) -> int:
    monkeypatch.setenv("SVCSRV_DATABASE_URL", db_url)
    return cli.main(list(argv))


def test_old_svc_ops_migrate_on_a_newer_schema_does_nothing(
        engine: Engine, db_url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    stamp(engine, NEWER)
    assert _ops(monkeypatch, db_url, "migrate") == 0  # a rolled-back deploy's migrate step
    out, err = capsys.readouterr()
    assert "Nothing to migrate" in err and "Traceback" not in err
    assert f"current={NEWER}" in out
    # Moving a schema this code does not know is for the version that wrote it.
    for argv in (("migrate", "--revision", "0015"), ("downgrade", "0014")):
        assert _ops(monkeypatch, db_url, *argv) == 2
        assert "svc-ops downgrade" in capsys.readouterr().err
    assert migrate.current_revision(engine) == NEWER
    assert _ops(monkeypatch, db_url, "db-revision") == 0
    assert "schema_ahead" in capsys.readouterr().out


def test_svc_ops_migrate_brings_a_schema_behind_to_head(
        engine: Engine, db_url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    migrate.downgrade(engine, "0014")
    assert _ops(monkeypatch, db_url, "migrate") == 0
    head = migrate.head_revision(engine)
    assert capsys.readouterr().out.strip() == f"current={head} head={head}"


@pytest.mark.parametrize("worker", ["chain", "webhooks"])
def test_workers_refuse_a_schema_behind(
        engine: Engine, db_url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], worker: str) -> None:
    """A new worker started before `svc-ops migrate` stops at once, with the server's
    sentence, instead of running until a query fails."""
    stamp(engine, "0014")
    assert _ops(monkeypatch, db_url, worker, "run") == 2
    err = capsys.readouterr().err
    assert f"{worker} run: database schema at 0014, behind" in err
    assert "svc-ops migrate" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [("relayer", "list"), ("actions",), ("domain", "list"),
                                  ("allowlist", "sync"), ("chain", "findings")])
def test_every_ledger_command_refuses_a_schema_behind(
        engine: Engine, db_url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    """Before `svc-ops migrate` (a new database, or a schema behind this code) a command
    says so and what to run, instead of failing at its first query with a traceback."""
    migrate.downgrade(engine, "base")
    assert _ops(monkeypatch, db_url, *argv) == 2
    err = capsys.readouterr().err
    assert "behind" in err and "svc-ops migrate" in err and "Traceback" not in err, err
