"""The seeded dev app (``svc-server dev``) is served because its origin really passes
verification: the demo origin of ``examples/`` checked by the production verifier."""

from __future__ import annotations

import socket
import ssl
import threading
import time

import uvicorn
from sqlalchemy.orm import Session, sessionmaker

from examples.demo_origin import DemoIdentity, demo_origin
from manifest.fetch import OriginClient
from manifest.url_policy import DnsResolver, UrlPolicy
from manifest.verify import verify_runtime
from payments.models import App, DomainRequestStatus, RuntimeStatus
from payments.runtime.operations import snapshot
from router.dev import DEMO_PAY_TO, DEMO_SLUG, seed_demo
from router.settings import Settings


def test_seeded_demo_passes_real_verification(sessions: sessionmaker[Session]) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    origin = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app_id = seed_demo(sessions, origin)
    server = uvicorn.Server(uvicorn.Config(
        demo_origin(DemoIdentity(app_id, DEMO_SLUG, DEMO_PAY_TO, origin)),
        log_level="warning", lifespan="off"))
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
        client = OriginClient(UrlPolicy.from_settings(Settings()), DnsResolver(),
                              ssl.create_default_context())
        report = verify_runtime(before.origin, before.expected, client)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
    assert report.passed, [c.as_dict() for c in report.failed]
