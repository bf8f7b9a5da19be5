"""``svc-server dev``: the command from the README, run as a person would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.services import free_port


def test_dev_command_serves_seeded_demo(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SVCSRV_")}
    proc = subprocess.Popen([str(Path(sys.executable).with_name("svc-server")), "dev",
                             "--port", str(port)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(base + "/healthz", headers={"host": f"api.localhost:{port}"}, timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None, "svc-server dev exited"
                assert time.monotonic() < deadline, "svc-server dev did not start"
                time.sleep(0.1)
        runtime = {"host": f"demo.apps.localhost:{port}"}
        page = httpx.get(base + "/", headers=runtime)
        assert page.status_code == 200
        assert "Demo runtime" in page.text
        echo = httpx.get(base + "/echo", headers={**runtime, "cookie": "mine=1"})
        seen = dict(echo.json()["headers"])
        assert "cookie" not in seen
        assert seen["x-forwarded-host"] == runtime["host"]
        assert "set-cookie" not in echo.headers
        manifest = httpx.get(base + "/.well-known/svc.json", headers=runtime).json()
        assert manifest["slug"] == "demo"
        assert manifest["appId"].startswith("zapp_")
        entry = httpx.get(base + "/demo", headers={"host": f"portal.localhost:{port}"})
        assert entry.status_code == 200
        assert "Unlock Level" in entry.text
        assert "0.03 USDC" in entry.text
        status = httpx.get(base + "/statusz", headers={"host": f"api.localhost:{port}"})
        assert status.json()["checks"]["database"]["status"] == "ok"
        assert (tmp_path / "var" / "svc.db").exists()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            output, _ = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
    assert f"http://demo.apps.localhost:{port}/" in output
    assert f"http://portal.localhost:{port}/demo" in output
    assert "Traceback" not in output
