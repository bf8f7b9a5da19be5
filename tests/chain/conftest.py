"""Fixtures for the chain tests."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from payments.chain.in_process import InProcessChain
from payments.db import make_engine, make_sessionmaker
from tests.chain.chain_env import ChainEnv, deploy_env
from tests.chain.world import World, recipient
from tests.conftest import fresh_pg_database


@pytest.fixture
def env() -> ChainEnv:
    """A chain as just deployed (through payments/chain/deploy.py): TestUSDC and
    BudgetSpenderV2, one relayer, two of the three recipients allowlisted."""
    return deploy_env()


@pytest.fixture
def world(sqlite_template: Path, tmp_path: Path) -> Iterator[World]:
    """A migrated SQLite ledger, a fresh in-process chain, and one allowlisted app."""
    path = tmp_path / "svc.db"
    shutil.copy(sqlite_template, path)
    engine = make_engine(f"sqlite:///{path}")
    built = World(make_sessionmaker(engine), InProcessChain.start())
    built.add_app("game", recipient(0))
    yield built
    engine.dispose()


@pytest.fixture
def pg_world(pg_admin_url: str, pg_template: str) -> Iterator[World]:
    """The same world on a fresh PostgreSQL database."""
    engine = make_engine(fresh_pg_database(pg_admin_url, pg_template))
    built = World(make_sessionmaker(engine), InProcessChain.start())
    built.add_app("game", recipient(0))
    yield built
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def any_world(request: pytest.FixtureRequest) -> World:
    """``world`` and then ``pg_world``: for what decides over money in one transaction."""
    fixture = "world" if request.param == "sqlite" else "pg_world"
    world: World = request.getfixturevalue(fixture)
    return world
