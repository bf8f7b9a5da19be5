"""The SDK and CLI ship to developers: they speak HTTP and import no server code."""

from __future__ import annotations

import subprocess
import sys

SERVER_SIDE = ("payments", "router", "portal", "ops", "manifest", "examples", "starlette",
               "sqlalchemy", "uvicorn")


def test_svc_imports_no_server_package() -> None:
    probe = ("import sys, svc.cli, svc.client, svc.backend, svc.proofs, svc.webhooks\n"
             f"print(sorted(m for m in sys.modules if m.split('.')[0] in {SERVER_SIDE!r}))")
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           check=True, timeout=60)
    assert found.stdout.strip() == "[]"
