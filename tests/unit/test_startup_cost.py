"""What keeps a server's start cheap (bench/startup_bench.py, docs/BENCHMARKS.md): each of
these, undone, cost every `svc-server serve` start, or every spawned process of one, a
measurable share of its CPU, with no test failing."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest
from argon2 import PasswordHasher, extract_parameters
from sqlalchemy import Engine

from payments import migrate
from payments.developer.passwords import Passwords
from router.heap import freeze_startup_heap, startup_collection_paused

ROOT = Path(__file__).resolve().parents[2]
# Imported by the processes that serve, never by router.cli itself: the parent of
# SVCSRV_PROCESSES > 1 imports router.cli alone (about 1.3 s of CPU when it took them all).
SERVICE_ONLY = ("router.app", "router.fast_protocol", "router.dev_runtime", "web3",
                "eth_account", "eth_tester", "alembic", "sqlalchemy.orm", "payments.models",
                "examples.reference_app")


def test_the_server_command_imports_no_service_of_its_own() -> None:
    code = ("import json, sys, router.cli, router.processes; "
            f"print(json.dumps([m for m in {list(SERVICE_ONLY)!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert json.loads(done.stdout) == []


class NoHashing(PasswordHasher):
    def hash(self, password: str | bytes, *, salt: bytes | None = None) -> str:
        raise AssertionError("a hash was computed")


def test_the_dummy_password_hash_costs_no_hashing() -> None:
    """Made, not hashed (0.17 s per process otherwise), and as costly to verify as a real
    one: the same parameters, so a log-in of an unknown name takes the time of a known."""
    hasher = NoHashing()
    passwords = Passwords(hasher)
    dummy = passwords._dummy
    assert extract_parameters(dummy) == extract_parameters(PasswordHasher().hash("x" * 12))
    assert not passwords.verify(None, "not-a-real-password")
    assert not passwords.verify(None, "")
    assert Passwords(hasher)._dummy != dummy  # random salt and digest, per service


def test_a_current_schema_is_not_upgraded_and_the_scripts_are_read_once(
        db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from alembic.script import ScriptDirectory

    from payments.db import make_engine

    engine = make_engine(db_url)
    migrate._scripts.cache_clear()
    reads = []
    original = ScriptDirectory.from_config

    def counted(config: object) -> ScriptDirectory:
        reads.append(config)
        return original(config)  # type: ignore[arg-type]

    def no_upgrade(engine: Engine, revision: str = "head") -> None:
        raise AssertionError("upgraded a current schema")

    monkeypatch.setattr(ScriptDirectory, "from_config", counted)
    monkeypatch.setattr(migrate, "upgrade", no_upgrade)
    try:
        for _ in range(3):
            schema = migrate.upgrade_unless_ahead(engine)
            assert schema.state is migrate.SchemaState.CURRENT
            assert migrate.require_usable(engine).current == migrate.head_revision(engine)
        assert len(reads) == 1
    finally:
        engine.dispose()


def test_the_collector_is_paused_until_the_heap_is_frozen() -> None:
    assert gc.isenabled()
    with startup_collection_paused():
        assert not gc.isenabled()
        freeze_startup_heap()
        assert gc.isenabled()
    assert gc.isenabled()
    gc.unfreeze()
    with pytest.raises(RuntimeError), startup_collection_paused():
        raise RuntimeError("the start failed")  # the collector is as it was
    assert gc.isenabled()
