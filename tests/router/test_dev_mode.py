"""``svc-server dev``: the command from the README, run as a person would."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.support.dev_server import dev_server


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
