"""No secret of the settings reaches a line ``svc-server`` writes, whoever logs it
(router/server_logs.py): the real command (tests/router/log_secrets.py) with one process,
with two, and ``dev``, its libraries logging the secrets through uvicorn's handler and the
root's, tracebacks included; its own lines and uvicorn's are written as before."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn

from router.log_mask import MASK
from router.processes import _serve_one
from router.server_logs import process_mask, uvicorn_log_config
from tests.conftest import fresh_pg_database
from tests.router.log_secrets import LEAKED
from tests.router.test_processes import server_env, workers_of
from tests.support.services import free_port
from tests.support.waits import wait_for

REPO = Path(__file__).resolve().parents[2]
RELAYER_KEY = "0x" + "5eC0de" * 10 + "beef"
SECRETS = {
    "SVCSRV_SECRET_KEY": "Secret-Key-Never-Logged-7f3a9c21d8e4b605",
    "SVCSRV_RELAYER_KEY": RELAYER_KEY,
    "SVCSRV_SMTP_HOST": "127.0.0.1", "SVCSRV_SMTP_USERNAME": "mailer",
    "SVCSRV_SMTP_PASSWORD": "Smtp-Pass-Q8v2",
    "SVCSRV_CHAIN_RPC_URL": "http://127.0.0.1:9/v2/Node-Api-Key-31415",
}
PG_PASSWORD = "Pg-Pass-Wx71"
# What must never appear, in any case, a hex key with or without its 0x.
NEVER = ["Secret-Key-Never-Logged", RELAYER_KEY.removeprefix("0x"), "Smtp-Pass-Q8v2",
         "Node-Api-Key-31415", PG_PASSWORD]


@dataclass
class Run:
    stdout: str
    stderr: str

    def lines(self, text: str) -> list[str]:
        return [line for line in self.stderr.splitlines() if text in line]


@contextmanager
def command(args: list[str], env: dict[str, str], cwd: Path) -> Iterator[subprocess.Popen[str]]:
    with (cwd / "out").open("w") as out, (cwd / "err").open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "tests.router.log_secrets", *args],
                                env={**env, "PYTHONPATH": str(REPO)}, cwd=cwd, text=True,
                                stdout=out, stderr=err)
        try:
            yield proc
        finally:
            for pid in workers_of(proc.pid):  # first: once the parent is gone, they are not its
                os.kill(pid, signal.SIGKILL)
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def run_until_leaked(args: list[str], env: dict[str, str], tmp_path: Path,
                     processes: int = 1, stop: signal.Signals = signal.SIGTERM) -> Run:
    """Start the command, wait until each serving process has written the library lines
    and started, stop it."""
    err = tmp_path / "err"

    def leaked() -> bool:
        assert proc.poll() is None, err.read_text()
        said = err.read_text()
        return said.count(LEAKED) == said.count("Application startup complete.") == processes

    with command(args, env, tmp_path) as proc:
        wait_for(leaked, 90, "the library lines")
        proc.send_signal(stop)
        proc.wait(timeout=30)
    return Run((tmp_path / "out").read_text(), err.read_text())


def assert_masked(run: Run, processes: int) -> None:
    said = (run.stdout + run.stderr).lower()
    assert [secret for secret in NEVER if secret.lower() in said] == [], run.stderr
    for logger in ("uvicorn said", "sqlalchemy said", "aiohttp said", "root said",
                   "UserWarning: library warned"):
        lines = run.lines(logger)
        assert len(lines) == processes, (logger, run.stderr)
        assert all(MASK in line for line in lines), lines
    # Tracebacks: through uvicorn's handler and the root's, each masked.
    assert len(run.lines(f"ConnectionError: cannot reach {MASK}")) == 2 * processes, run.stderr


@pytest.fixture
def pg_url_with_password(pg_admin_url: str, pg_template: str) -> str:
    """A migrated PostgreSQL database, its URL carrying a password (the test server trusts
    loopback, so it is sent only to be logged)."""
    url = fresh_pg_database(pg_admin_url, pg_template)
    return url.replace("postgres@", f"postgres:{PG_PASSWORD}@", 1)


@pytest.mark.parametrize("processes", [1, 2])
def test_serve_masks_every_library_line(processes: int, pg_url_with_password: str,
                                        redis_url: str, tmp_path: Path) -> None:
    env = server_env(free_port(), SVCSRV_DATABASE_URL=pg_url_with_password,
                     SVCSRV_REDIS_URL=redis_url, SVCSRV_PROCESSES=str(processes), **SECRETS)
    run = run_until_leaked(["serve"], env, tmp_path, processes)

    assert_masked(run, processes)
    # The service's and uvicorn's own lines are as they were, whole.
    plural = "es" if processes > 1 else ""
    assert (f"mode: dev (SVCSRV_MODE unset or dev; database postgresql, chain json_rpc, "
            f"{processes} process{plural}): migrates at start") in run.stderr
    assert len(run.lines("Application startup complete.")) == processes, run.stderr
    assert len(run.lines("Finished server process")) == processes, run.stderr


def test_dev_masks_every_library_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SVCSRV_", "SVC_"))}
    env.update({key: SECRETS[key] for key in ("SVCSRV_SECRET_KEY", "SVCSRV_SMTP_HOST",
                                              "SVCSRV_SMTP_USERNAME", "SVCSRV_SMTP_PASSWORD")})
    env["SVCSRV_DATABASE_URL"] = f"sqlite:///{tmp_path / 'svc.db'}"
    run = run_until_leaked(["dev", "--port", str(free_port())], env, tmp_path,
                           stop=signal.SIGINT)

    assert_masked(run, 1)
    assert "reference app" in run.stdout  # what to open, printed whole
    assert "Uvicorn running on http://127.0.0.1:" in run.stderr


def test_an_error_that_ends_the_command_is_logged_masked(tmp_path: Path) -> None:
    """Python would print it itself, around the mask."""
    env = server_env(free_port(), SVCSRV_DATABASE_URL=f"sqlite:///{tmp_path / 'svc.db'}",
                     LOG_SECRETS_FAIL="1", PYTHONPATH=str(REPO), **SECRETS)
    done = subprocess.run([sys.executable, "-m", "tests.router.log_secrets", "serve"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          check=False)

    assert done.returncode == 1, done.stderr
    said = (done.stdout + done.stderr).lower()
    assert [secret for secret in NEVER if secret.lower() in said] == [], done.stderr
    assert "ERROR router.cli: svc-server stopped on an error\nTraceback" in done.stderr
    assert f"ConnectionError: cannot reach {MASK} {MASK}" in done.stderr


def test_uvicorns_handler_passes_the_mask_and_there_is_no_access_handler() -> None:
    uvicorn.Config(lambda: None, log_config=uvicorn_log_config(), access_log=False)
    handlers = logging.getLogger("uvicorn").handlers
    assert handlers and all(process_mask() in handler.filters for handler in handlers)
    access = logging.getLogger("uvicorn.access")
    assert access.handlers == [] and not access.propagate
    for name in ("uvicorn.error", "uvicorn.asgi"):  # theirs reach uvicorn's handler
        assert logging.getLogger(name).handlers == [] and logging.getLogger(name).propagate


def test_a_server_process_that_fails_logs_it(caplog: pytest.LogCaptureFixture) -> None:
    """Through logging, whose handlers carry the mask, not multiprocessing's own print."""
    def failing() -> None:
        raise RuntimeError("cannot configure")

    def config() -> uvicorn.Config:
        return uvicorn.Config(lambda: None, log_config=None)

    with pytest.raises(SystemExit) as stopped:
        _serve_one(config, os.getpid(), failing)
    assert stopped.value.code == 1
    [record] = [r for r in caplog.records if r.name == "router.processes"]
    assert record.getMessage() == f"server process {os.getpid()} failed"
    assert record.exc_info is not None and str(record.exc_info[1]) == "cannot configure"
