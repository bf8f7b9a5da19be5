"""``svc-ops`` against the in-process EVM served as a JSON-RPC node (tests/support/evm_node.py):
the settings name it by URL, as they name Base, and the compiled contracts run on it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from ops.cli import main
from payments.chain.in_process import DEPLOYER_KEY
from payments.db import make_engine, make_sessionmaker
from tests.support.evm_node import EvmNode, evm_node


@pytest.fixture
def evm() -> Iterator[EvmNode]:
    with evm_node() as node:
        yield node


@dataclass
class Ops:
    """``svc-ops ARGS`` in this process with only these SVCSRV_* variables (``**env``
    changes them for one run; None unsets one); returns (exit code, stdout, stderr)."""

    env: dict[str, str]
    owner_key_file: Path
    monkeypatch: pytest.MonkeyPatch
    capsys: pytest.CaptureFixture[str]
    _engine: Engine | None = field(default=None, init=False)

    def __call__(self, *args: str, **env: str | None) -> tuple[int, str, str]:
        self.capsys.readouterr()
        with self.monkeypatch.context() as patch:
            for key in [k for k in os.environ if k.startswith("SVCSRV_")]:
                patch.delenv(key)
            changed = {**self.env, **{f"SVCSRV_{k}": v for k, v in env.items()}}
            for key, value in changed.items():
                if value is not None:
                    patch.setenv(key, value)
            patch.setenv("USER", "opsuser")
            code = main(list(args))
        out, err = self.capsys.readouterr()
        return code, out, err

    def owner(self, *args: str, **env: str | None) -> tuple[int, str, str]:
        """An owner transaction's command, with the contracts' owner key from a file."""
        return self(*args, "--owner-key-file", str(self.owner_key_file), **env)

    def sessions(self) -> sessionmaker[Session]:
        """The ledger svc-ops writes to."""
        if self._engine is None:
            self._engine = make_engine(self.env["SVCSRV_DATABASE_URL"])
        return make_sessionmaker(self._engine)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()


def _ops(evm: EvmNode, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
         capsys: pytest.CaptureFixture[str]) -> Iterator[Ops]:
    params = evm.params
    key_file = tmp_path / "owner.key"
    key_file.write_text(DEPLOYER_KEY.hex() + "\n")  # the contracts' owner, as a file holds it
    env = {"SVCSRV_DATABASE_URL": database_url, "SVCSRV_CHAIN_BACKEND": "json_rpc",
           "SVCSRV_CHAIN_RPC_URL": evm.url, "SVCSRV_CHAIN_ID": str(params.chain_id),
           "SVCSRV_SPENDER_ADDRESS": params.spender, "SVCSRV_USDC_ADDRESS": params.token,
           "SVCSRV_USDC_NAME": params.token_name, "SVCSRV_USDC_VERSION": params.token_version,
           "SVCSRV_CHAIN_CONFIRMATIONS": "1"}
    ops = Ops(env, key_file, monkeypatch, capsys)
    yield ops
    ops.close()


@pytest.fixture
def ops(evm: EvmNode, sqlite_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> Iterator[Ops]:
    """``svc-ops`` on a SQLite ledger, with no relayer key in its settings."""
    path = tmp_path / "ops.db"
    shutil.copy(sqlite_template, path)
    yield from _ops(evm, f"sqlite:///{path}", tmp_path, monkeypatch, capsys)


@pytest.fixture
def any_ops(evm: EvmNode, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            capsys: pytest.CaptureFixture[str]) -> Iterator[Ops]:
    """The same on SQLite, then on PostgreSQL."""
    yield from _ops(evm, db_url, tmp_path, monkeypatch, capsys)
