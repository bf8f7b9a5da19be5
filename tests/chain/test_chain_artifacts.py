"""The committed artifacts are the build of the committed sources."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from eth.vm.forks.prague import PragueVM
from web3 import EthereumTesterProvider

from payments.chain.contracts import (
    ARTIFACTS_DIR,
    CONTRACT_NAMES,
    CONTRACTS_DIR,
    load_artifact,
    source_hash,
)


@pytest.mark.parametrize("name", CONTRACT_NAMES)
def test_artifact_matches_sources(name: str) -> None:
    current = source_hash()
    assert current is not None, "contracts/*.sol not found"
    assert load_artifact(name).source_hash == current, (
        "stale artifact: run `cd contracts && npm ci && node build.mjs`"
    )


@pytest.mark.parametrize("name", CONTRACT_NAMES)
def test_artifact_shape(name: str) -> None:
    artifact = load_artifact(name)
    assert artifact.contract_name == name
    assert re.fullmatch(r"0x(?:[0-9a-f]{2})+", artifact.bytecode)
    assert re.fullmatch(r"0x(?:[0-9a-f]{2})+", artifact.deployed_bytecode)
    assert artifact.compiler["evmVersion"] == "prague"
    assert artifact.compiler["optimizer"]["enabled"] is True


def test_source_hash_is_none_without_sources(tmp_path: Path) -> None:
    assert source_hash(tmp_path / "missing") is None
    assert source_hash(tmp_path) is None


def test_rebuild_is_byte_identical(tmp_path: Path) -> None:
    # Deliberately a failure, not a skip: CI runs `npm ci` in contracts/ before the tests.
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed; the contracts cannot be rebuilt")
    if not (CONTRACTS_DIR / "node_modules").is_dir():
        pytest.fail("contracts/node_modules missing: run `npm ci` in contracts/")
    subprocess.run(
        [node, "build.mjs", "--out", str(tmp_path)],
        cwd=CONTRACTS_DIR,
        check=True,
        capture_output=True,
        timeout=120,
    )
    for name in CONTRACT_NAMES:
        rebuilt = load_artifact(name, tmp_path)
        committed = load_artifact(name)
        assert rebuilt.bytecode == committed.bytecode, f"{name}: bytecode differs"
        assert rebuilt.deployed_bytecode == committed.deployed_bytecode
        file = f"{name}.json"
        assert (tmp_path / file).read_bytes() == (ARTIFACTS_DIR / file).read_bytes()


def test_in_process_chain_runs_prague() -> None:
    # The artifacts are compiled for prague; the in-process chain must run that fork.
    tester = EthereumTesterProvider().ethereum_tester
    assert tester is not None
    assert isinstance(tester.backend.chain.get_vm(), PragueVM)
