"""The compiled fast path (router/native.py, scripts/build_native.py): what the tests and the
server run is the build of the current sources, and an edit since is caught."""

from __future__ import annotations

import importlib
import importlib.machinery
import logging
import shutil
from pathlib import Path

import pytest

from router import cli, native

SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def test_the_fast_path_runs_compiled_from_its_current_sources() -> None:
    # scripts/install.sh builds it: every test of the fast path runs the compiled modules.
    assert native.status() == "compiled", "run scripts/build_native.py"
    for name in native.MODULES:
        module = importlib.import_module(f"router.{name}")
        assert module.__file__ is not None and module.__file__.endswith(SUFFIX), name


@pytest.fixture
def sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the modules' sources, which router.native then reads instead."""
    for name in native.MODULES:
        shutil.copy(native.HERE / f"{name}.py", tmp_path / f"{name}.py")
    monkeypatch.setattr(native, "HERE", tmp_path)
    monkeypatch.setattr(native, "STAMP", tmp_path / "native.stamp")
    return tmp_path


def build(where: Path, compiler: str = "mypyc-test") -> None:
    for name in (*native.MODULES, "native__mypyc"):
        (where / f"{name}{SUFFIX}").write_bytes(b"")
    (where / "native.stamp").write_text(f"{compiler} {native.digest(compiler)}\n")


def test_no_build_is_pure_and_a_stamped_build_is_compiled(sources: Path) -> None:
    assert native.status() == "pure"
    build(sources)
    assert native.status() == "compiled"
    assert len(native.built()) == len(native.MODULES) + 1


def test_an_edited_source_makes_the_build_stale(sources: Path) -> None:
    build(sources)
    path = sources / "fast_protocol.py"
    path.write_text(path.read_text() + "\n# edited\n")
    assert native.status() == "stale"


@pytest.mark.parametrize("damage", ["no stamp", "garbled stamp", "other compiler",
                                    "a module missing"])
def test_a_build_that_does_not_match_is_stale(sources: Path, damage: str) -> None:
    build(sources)
    stamp = sources / "native.stamp"
    if damage == "no stamp":
        stamp.unlink()
    elif damage == "garbled stamp":
        stamp.write_text("mypyc-test")
    elif damage == "other compiler":
        stamp.write_text(f"mypyc-other {native.digest('mypyc-test')}\n")
    else:
        (sources / f"headers{SUFFIX}").unlink()
    assert native.status() == "stale"


def test_the_server_warns_when_it_would_run_a_stale_build(
        sources: Path, caplog: pytest.LogCaptureFixture) -> None:
    build(sources)
    (sources / "headers.py").write_text("# edited\n")
    with caplog.at_level(logging.INFO, logger="router.cli"):
        cli.report_native()
    assert [record.levelname for record in caplog.records] == ["WARNING"]
    assert "scripts/build_native.py" in caplog.text
    caplog.clear()
    build(sources)
    with caplog.at_level(logging.INFO, logger="router.cli"):
        cli.report_native()
    assert caplog.messages == ["fast path: compiled (mypyc)"]
