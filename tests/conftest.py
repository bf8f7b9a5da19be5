"""Session services (real PostgreSQL and Redis) and the database fixture.

``db_url`` runs every test that asks for it twice: on a SQLite file and on a fresh
PostgreSQL database cloned from a migrated template.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.orm import Session, sessionmaker

from ops.cluster.processes import PORTS_ENV, port_range
from payments import migrate
from payments.db import make_engine, make_sessionmaker
from tests.support.router import RouterFactory, router_factory
from tests.support.services import postgres_server, redis_server

_counter = itertools.count()


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


@pytest.fixture(scope="session")
def pg_template(pg_admin_url: str) -> str:
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute("CREATE DATABASE svc_template")
    url = pg_admin_url.rsplit("/", 1)[0] + "/svc_template"
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    return "svc_template"


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "svc.db"
    engine = make_engine(f"sqlite:///{path}")
    migrate.upgrade(engine)
    engine.dispose()
    return path


def fresh_pg_database(admin_url: str, template: str | None) -> str:
    name = f"svc_test_{next(_counter)}"
    clause = f" TEMPLATE {template}" if template else ""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}{clause}")
    return admin_url.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated, empty database on each backend."""
    if request.param == "sqlite":
        path = tmp_path / "svc.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    return fresh_pg_database(request.getfixturevalue("pg_admin_url"),
                             request.getfixturevalue("pg_template"))


@pytest.fixture
def sessions(db_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(db_url)
    yield make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture
def start_router(db_url: str) -> RouterFactory:
    """``with start_router(**setting_overrides) as router:``, on SQLite and PostgreSQL."""
    return router_factory(db_url)


# Modules whose module-scoped fixtures start something costly (a whole cluster, an image, a
# node): under pytest-xdist (scripts/test.sh runs ``-n 2 --dist loadgroup``) each module's
# tests stay on one worker, so that fixture starts once, not once per worker. The bench
# smoke tests each load the box with a whole bench: one worker runs them one at a time.
_ONE_WORKER = ("tests.deploy.", "tests.chain.test_json_rpc",
               "tests.router.test_auth_return_browser", "tests.router.test_proxy_streaming",
               "tests.unit.test_topology_figures", "tests.bench.test_benches_run")


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, each worker picks free ports from its own slice of the range."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if worker.startswith("gw") and worker[2:].isdigit() and count > 1:
        low, high = port_range()
        size = (high - low) // count
        start = low + int(worker[2:]) * size
        os.environ[PORTS_ENV] = f"{start}-{start + size}"


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup``, with a group per module of ``_ONE_WORKER``. Not through
    ``xdist_group`` markers: pytest-xdist 3.8 groups them by rewriting ``item._nodeid``,
    which pytest 9.2 no longer reads (its node ids are ``item._id``), so the markers were
    silently ignored and those modules' tests spread over both workers, each starting its
    own cluster (tests/unit/test_xdist_groups.py checks the grouping)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling  # type: ignore[import-untyped]

    class ModuleGroups(LoadGroupScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return one_worker_group(nodeid) or super()._split_scope(nodeid)

    return ModuleGroups(config, log)


def one_worker_group(nodeid: str) -> str | None:
    """The group of a test that must share its module's worker, else None."""
    module = nodeid.split("::", 1)[0].removesuffix(".py").replace("/", ".")
    return module if module.startswith(_ONE_WORKER) else None
