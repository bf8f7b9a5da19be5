"""``svc … | head``: a command whose reader has gone ends quietly, the real commands with
their stdout a pipe nobody reads any more. (``--help`` needs nothing: argparse drops its
own write errors.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from svc.pipes import READER_GONE

BIN = Path(sys.executable).parent


def _run_into_a_closed_pipe(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the command writes
    try:
        return subprocess.run(argv, stdout=write_end, stderr=subprocess.PIPE, text=True,
                              timeout=60, check=False, cwd=cwd)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("argv", [
    ("svc", "price", "0.01"),
    ("svc-ops", "db-revision"),  # on the dev SQLite file, created in tmp_path
])
def test_a_reader_that_left_ends_the_command_without_a_traceback(
        argv: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SVCSRV_DATABASE_URL", raising=False)
    done = _run_into_a_closed_pipe(tmp_path, str(BIN / argv[0]), *argv[1:])
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == READER_GONE


def test_a_reader_that_stays_gets_everything() -> None:
    done = subprocess.run([str(BIN / "svc"), "price", "0.01"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0 and done.stdout == "0.010000 USD = 10000 atomic units\n"
