"""``svc-ops``'s command line (ops/cli.py): a command's module is imported only when that
command is given, so ``--help``, a mistyped command and a database command start without
web3, eth-abi, Redis or the chain's modules; the help lines it lists without them are the
modules' own; and a usage error argparse cannot state is still one (exit 2)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ops.cli import COMMANDS, build_parser, command_named

SVC_OPS = str(Path(sys.executable).with_name("svc-ops"))
REPO = Path(__file__).resolve().parents[2]
# What the chain, runtime, review and webhook commands import, and a database command or
# --help has no use for: most of a second of CPU between them (bench/startup_bench.py).
HEAVY = ("web3", "eth_account", "eth_abi", "redis", "aiohttp", "dns.resolver",
         "ops.chain", "ops.relayers", "ops.contract", "ops.ownership", "ops.runtime",
         "ops.review", "ops.webhooks")


# The real script run as `python -c WRAPPER SCRIPT ARGS`, writing the modules it imported
# to $MODULES_OUT at exit (-X importtime would not list those importlib.import_module loads).
WRAPPER = """
import atexit, os, runpy, sys
def written():
    with open(os.environ["MODULES_OUT"], "w") as out:
        out.write("\\n".join(sorted(sys.modules)))
atexit.register(written)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def svc_ops(*args: str, cwd: Path, **env: str) -> tuple[subprocess.CompletedProcess[str],
                                                         set[str]]:
    """The real ``svc-ops ARGS`` with only ``env``'s SVCSRV_* variables, and the modules
    it imported."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SVCSRV_")}
    out = cwd / "modules.txt"
    # PYTHONPATH: the script of an editable install may import another checkout.
    done = subprocess.run([sys.executable, "-c", WRAPPER, SVC_OPS, *args], cwd=cwd,
                          env={**clean, **env, "PYTHONPATH": str(REPO),
                               "MODULES_OUT": str(out)},
                          text=True, capture_output=True, timeout=60, check=False)
    return done, set(out.read_text().splitlines())


def test_help_and_a_mistyped_command_import_no_command_module(tmp_path: Path) -> None:
    done, imported = svc_ops("--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "kill-switch         stop (or resume) serving and charging an app" in done.stdout
    assert "ops.cli" in imported  # the lines were read
    assert sorted(imported & {*HEAVY, "sqlalchemy", "alembic", "ops.schema"}) == []

    done, imported = svc_ops("kill-swich", "on", "game", cwd=tmp_path)
    assert done.returncode == 2
    assert "invalid choice: 'kill-swich' (choose from 'migrate'," in done.stderr
    assert sorted(imported & {*HEAVY, "sqlalchemy", "alembic", "ops.schema"}) == []


def test_a_database_command_imports_only_its_own_module(sqlite_template: Path,
                                                         tmp_path: Path) -> None:
    database = tmp_path / "ops.db"
    shutil.copy(sqlite_template, database)
    done, imported = svc_ops("db-revision", cwd=tmp_path,
                             SVCSRV_DATABASE_URL=f"sqlite:///{database}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("current=") and "ops.schema" in imported
    assert sorted(imported & set(HEAVY)) == []


def test_a_commands_help_imports_its_module(tmp_path: Path) -> None:
    done, imported = svc_ops("kill-switch", "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: svc-ops kill-switch [-h] [--verbose] {on,off,list}")
    assert "ops.runtime" in imported and "ops.chain" not in imported


def test_the_help_lines_are_the_modules_own() -> None:
    """--help without the modules (stand-ins with COMMANDS' lines) reads as with them all."""
    every = {command.module for command in COMMANDS.values()}
    assert build_parser([]).format_help() == build_parser(every).format_help()
    for module in every:  # and with each one alone, as when its command is given
        assert build_parser([module]).format_help() == build_parser([]).format_help()


@pytest.mark.parametrize(("argv", "command"), [
    (["--help"], None), ([], None), (["--verbose", "chain", "run"], "chain"),
    (["--verb", "webhooks", "status", "--verbose"], "webhooks"), (["--", "migrate"], "migrate"),
    (["nope", "chain"], "nope"),
])
def test_the_command_is_the_first_argument_not_an_option(argv: list[str],
                                                          command: str | None) -> None:
    assert command_named(argv) == command


def test_transfer_ownership_without_a_target_says_what_to_give(tmp_path: Path) -> None:
    """Neither --to, an address nor --cancel: a usage error of that command, before any
    setting is read (here none are), not argparse's "one of the arguments --to NEW_OWNER
    --cancel is required", which reads as one option."""
    for extra in ([], ["--one-step", "--yes"]):
        done, _ = svc_ops("contract", "transfer-ownership", *extra, cwd=tmp_path,
                          SVCSRV_MODE="production")
        assert done.returncode == 2
        assert done.stderr.startswith("usage: svc-ops contract transfer-ownership [-h]")
        assert done.stderr.endswith(
            "\nsvc-ops contract transfer-ownership: error: say whom to hand the spender to: "
            "--to ADDRESS (or the address alone), or --cancel to clear the pending owner\n")
    done, _ = svc_ops("contract", "transfer-ownership", "--to", "0x1", "--cancel",
                      cwd=tmp_path)
    assert done.returncode == 2 and "argument --cancel: not allowed with argument --to" in (
        done.stderr)
