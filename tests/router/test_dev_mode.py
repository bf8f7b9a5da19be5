"""``svc-server dev``: the command from the README, run as a person would."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import sqlite3
import subprocess
from pathlib import Path

import httpx
import pytest

from router.cli import QuietDemoServer, serve_demo
from tests.support.dev_server import SVC_SERVER, dev_env, dev_server
from tests.support.services import free_port


def test_dev_command_serves_seeded_demo(tmp_path: Path) -> None:
    with dev_server(tmp_path) as server:
        base, port = server.url, server.port
        runtime = server.host("demo.apps")
        page = httpx.get(base + "/", headers=runtime)
        assert page.status_code == 200
        assert "The reference developer app" in page.text
        echo = httpx.get(base + "/echo", headers={**runtime, "cookie": "mine=1"})
        seen = dict(echo.json()["headers"])
        assert "cookie" not in seen
        assert seen["x-forwarded-host"] == runtime["host"]
        assert "set-cookie" not in echo.headers
        manifest = httpx.get(base + "/.well-known/svc.json", headers=runtime).json()
        assert manifest["slug"] == "demo"
        assert manifest["appId"].startswith("zapp_")
        entry = httpx.get(base + "/demo", headers=server.host("portal"))
        assert entry.status_code == 200
        assert "Unlock Level" in entry.text
        assert "0.03 USDC" in entry.text
        status = httpx.get(base + "/statusz", headers=server.host("api"))
        assert status.json()["checks"]["database"]["status"] == "ok"
        assert (tmp_path / "var" / "svc.db").exists()
        assert (tmp_path / "var" / "reference-app.db").exists()  # the app's own store
    output = server.output()
    assert f"http://demo.apps.localhost:{port}/" in output
    assert f"http://portal.localhost:{port}/demo" in output
    assert f"http://console.localhost:{port}/signup" in output
    # Two uvicorn servers run in the process (the service and the demo app); only the
    # service's tells its start and stop, so each line is said once.
    lines = output.splitlines()
    for said in ("Started server process", "Waiting for application startup.",
                 "Application startup complete.", "Uvicorn running on", "Shutting down",
                 "Waiting for application shutdown.", "Application shutdown complete.",
                 "Finished server process"):
        assert sum(said in line for line in lines) == 1, (said, output)


def test_the_demo_servers_warnings_still_show(caplog: pytest.LogCaptureFixture) -> None:
    """Only the demo server's info lines are dropped; its warnings and the service's lines,
    logged meanwhile on the same logger, are kept."""
    logger = logging.getLogger("uvicorn.error")

    class Demo:  # stands for uvicorn.Server: logs as its serve() would
        async def serve(self, sockets: list[socket.socket]) -> None:
            logger.info("demo started")
            logger.warning("demo warned")
            await asyncio.sleep(0)

    async def service() -> None:
        logger.info("service started")

    async def both() -> None:
        with socket.socket() as sock:
            await asyncio.gather(serve_demo(Demo(), sock),  # type: ignore[arg-type]
                                 service())

    quiet = QuietDemoServer()
    logger.addFilter(quiet)
    try:
        with caplog.at_level(logging.INFO, logger="uvicorn.error"):
            asyncio.run(both())
            logger.info("after")
    finally:
        logger.removeFilter(quiet)
    assert [r.getMessage() for r in caplog.records] == ["demo warned", "service started",
                                                        "after"]


def test_a_port_in_use_is_one_line_naming_port(tmp_path: Path) -> None:
    """A second ``svc-server dev`` on a taken port used to print the URLs (which the other
    server answers), migrate, then end in uvicorn's tracebacks; now it stops first, with
    the flag that picks another port."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([SVC_SERVER, "dev", "--port", str(port)], cwd=tmp_path,
                              env=dev_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert f"svc-server dev --port {port + 1}" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "Dev service on embedded defaults" not in done.stdout  # no URLs of another server
    assert not (tmp_path / "var" / "svc.db").exists()  # nothing migrated


def test_a_second_dev_server_on_the_same_var_stops_at_once(tmp_path: Path) -> None:
    """Two servers on one var/ would share the ledger but not the chain (each settling the
    other's rows on its own chain) and both append to var/chain-state; the second stops
    before it migrates, seeds or writes anything, as one on a taken port does."""
    with dev_server(tmp_path) as first:
        state = tmp_path / "var" / "chain-state"
        before = state.read_bytes()
        port = free_port()
        done = subprocess.run([SVC_SERVER, "dev", "--port", str(port)], cwd=tmp_path,
                              env=dev_env(), capture_output=True, text=True, timeout=60)
        assert done.returncode == 3, done
        assert (f"another svc-server dev is running on {tmp_path / 'var'} (its ledger and "
                "its chain); stop it first, or start this one in another directory"
                ) in done.stderr
        assert "Dev service on embedded defaults" not in done.stdout
        assert state.read_bytes() == before
        assert httpx.get(first.url + "/healthz", headers=first.host("api")).status_code == 200


def test_a_restart_without_the_chain_state_file_says_what_the_ledger_lost(
        tmp_path: Path) -> None:
    """var/svc.db is kept between runs, and so is the in-process chain, in var/chain-state
    (router/dev_chain.py). Without the file (a var/ from before the chain was kept, or the
    file deleted) a new chain starts, and budgets relayed in an earlier run are in the
    ledger but not on it, so their charges fail to settle. The first run has nothing to
    say; a later one says why, and what to do."""
    with dev_server(tmp_path) as first:
        pass
    assert "not taken up" not in first.output()
    state = tmp_path / "var" / "chain-state"
    assert state.exists()
    state.unlink()
    with sqlite3.connect(tmp_path / "var" / "svc.db") as db:  # what a settlement leaves
        db.execute("INSERT INTO chain_transactions (kind, status, tx_hash, created_at) "
                   "VALUES ('charge_batch', 'confirmed', ?, '2026-11-28 00:00:00')",
                   ("0x" + "ab" * 32,))
    with dev_server(tmp_path) as again:
        again.wait_for(re.compile(r"not taken up"))
    said = again.output()
    assert ("0 active budget(s) and 1 mined chain transaction(s) of an earlier in-process "
            f"chain, which was not taken up: there is no {state}") in said
    assert f"delete {tmp_path / 'var'} " in said
    assert state.exists()  # the new chain, kept from now on
