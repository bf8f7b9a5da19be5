"""The seeded dev app (``svc-server dev``) is served because its runtime really passes
verification: the reference app, wired as dev wires it, checked by the production verifier.
Its loopback webhook is admitted only by dev settings."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from pathlib import Path

import pytest
import uvicorn
from sqlalchemy.orm import Session, sessionmaker

from manifest.fetch import OriginClient
from manifest.url_policy import DnsResolver, UrlPolicy
from manifest.verify import verify_runtime
from payments.errors import ApiError
from payments.models import App, DomainRequestStatus, RuntimeStatus
from payments.runtime.operations import snapshot
from router.dev import seed_demo
from router.dev_backend import seed_demo_backend
from router.dev_runtime import WEBHOOK_PATH, demo_catalogue, demo_runtime
from router.settings import Settings


def test_seeded_demo_passes_real_verification(sessions: sessionmaker[Session],
                                              tmp_path: Path) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    origin = f"http://127.0.0.1:{sock.getsockname()[1]}"
    settings = Settings()
    app_id = seed_demo(sessions, origin)
    backend = seed_demo_backend(sessions, settings, app_id, origin + WEBHOOK_PATH)
    catalogue = demo_catalogue(sessions, app_id)
    assert [i.slug for i in catalogue.items] == ["retry", "unlock-level", "generate-once"]
    assert all(i.product_id and i.product_id.startswith("zprod_") for i in catalogue.items)
    runtime = demo_runtime(settings, backend, origin, catalogue, tmp_path)
    server = uvicorn.Server(uvicorn.Config(runtime, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.01)
        with sessions() as session:
            app = session.get(App, app_id)
            assert app is not None
            assert app.runtime_status is RuntimeStatus.ACTIVE
            assert app.runtime_domain_request_status is DomainRequestStatus.APPROVED
            before = snapshot(app)
        client = OriginClient(UrlPolicy.from_settings(settings), DnsResolver(),
                              ssl.create_default_context())
        report = verify_runtime(before.origin, before.expected, client)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
    assert report.passed, [c.as_dict() for c in report.failed]
    assert (tmp_path / "reference-app.db").exists()  # the app's store, in the data dir


def test_serve_settings_refuse_the_loopback_webhook(sessions: sessionmaker[Session]) -> None:
    origin = "http://127.0.0.1:9"
    app_id = seed_demo(sessions, origin)
    production = Settings(
        mode="production", base_url="https://api.example.com",
        portal_url="https://portal.example.com", console_url="https://console.example.com",
        docs_url="https://docs.example.com", apps_domain="apps.example.com",
        apps_scheme="https", apps_port=None, allow_private_origins=False,
        secret_key="s" * 40, smtp_host="smtp.example.com")
    with pytest.raises(ApiError) as refused:
        seed_demo_backend(sessions, production, app_id, origin + WEBHOOK_PATH)
    assert refused.value.code == "webhook_url_invalid"
