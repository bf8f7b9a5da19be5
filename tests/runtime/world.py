"""A real router, a developer with an app, an HTTPS developer origin and a DNS server, all on
loopback, for the runtime lifecycle tests.

The router trusts the test CA (``runtime_ssl_context``, production uses the system store),
asks the loopback DNS server (standing in for public DNS) about names, and runs with the
dev/local switch that admits loopback origins. Its API origin is ``http://127.0.0.1:PORT``
so the ``svc`` executable can reach it without ``*.localhost`` resolving; that makes
127.0.0.1 a service host, so the developer origin is ``https://localhost:PORT``.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme
from sqlalchemy.orm import Session, sessionmaker

from payments.models import DomainRequestStatus, PayToStatus
from router.app import create_app
from router.settings import Settings
from tests.factories import add_developer, add_owned_app, open_console_session
from tests.manifest.origin import PAY_TO, DeveloperOrigin, client_context, developer_origin
from tests.support.cli_grant import issue_grant, save_grant
from tests.support.dns import DnsServer, dns_server
from tests.support.router import router_settings
from tests.support.servers import serve_router

SVC = str(Path(sys.executable).with_name("svc"))
SLUG = "game"


@dataclass
class World:
    url: str  # the API origin, http://127.0.0.1:PORT
    port: int
    settings: Settings
    sessions: sessionmaker[Session]
    developer_id: str
    app_id: str
    origin: DeveloperOrigin
    dns: DnsServer
    home: Path
    clients: list[httpx.Client] = field(default_factory=list)  # closed with the world

    @property
    def origin_url(self) -> str:
        return f"https://localhost:{self.origin.port}"

    # The developer's side

    def grant(self, *scopes: str, app: str = SLUG) -> str:
        """A CLI grant token for ``scopes``, issued as the device flow would issue it."""
        return issue_grant(self.sessions, self.developer_id, app, list(scopes)).token

    def api(self, token: str) -> httpx.Client:
        client = httpx.Client(base_url=self.url, timeout=60,
                              headers={"authorization": f"Bearer {token}"})
        self.clients.append(client)
        return client

    def console(self) -> httpx.Client:
        cookie, csrf = open_console_session(self.sessions, self.developer_id)
        return httpx.Client(base_url=self.url, timeout=60, headers={
            "host": f"console.localhost:{self.port}", "x-csrf-token": csrf,
            "cookie": f"svc_console={cookie}"})

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("SVC_API_URL", "BROWSER")}
        return {**env, "SVC_CONFIG_DIR": str(self.home / "config")}

    def svc(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([SVC, *args, "--api-url", self.url], cwd=self.home,
                              env=self.env(), text=True, capture_output=True, timeout=120,
                              check=False)

    def sign_in(self, scopes: str) -> None:
        """Signed in, as ``svc auth device`` approved in the console leaves the CLI (the
        flow itself: tests/svc/test_cli_end_to_end.py)."""
        save_grant(self.sessions, self.developer_id, SLUG, scopes, self.home / "config",
                   self.url)

    # The operator's side

    def ops(self, *args: str, user: str | None = "opsuser") -> tuple[int, str, str]:
        """``svc-ops`` (its ``main``, in this process) with this world's settings."""
        from ops.cli import main
        env = {"SVCSRV_DATABASE_URL": self.settings.database_url,
               "SVCSRV_APPS_DOMAIN": self.settings.apps_domain,
               "SVCSRV_DNS_SERVER": f"{self.dns.host}:{self.dns.port}",
               "SVCSRV_ROUTER_ADDRESSES": ",".join(self.settings.router_addresses),
               "SVCSRV_RUNTIME_FETCH_TIMEOUT": str(self.settings.runtime_fetch_timeout),
               "SVCSRV_REDIS_URL": self.settings.redis_url or ""}
        out, err = io.StringIO(), io.StringIO()
        with pytest.MonkeyPatch.context() as patch:
            for key in [k for k in os.environ if k.startswith("SVCSRV_")]:
                patch.delenv(key)
            for key, value in env.items():
                patch.setenv(key, value)
            if user is None:
                patch.delenv("USER", raising=False)
            else:
                patch.setenv("USER", user)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(list(args))
        return code, out.getvalue(), err.getvalue()

    # A visitor's side

    def visit(self, path: str = "/") -> httpx.Response:
        return httpx.get(self.url + path, headers={
            "host": f"{SLUG}.{self.settings.apps_domain}:{self.port}"}, timeout=30)


@contextmanager
def runtime_world(db_url: str, sessions: sessionmaker[Session], tmp_path: Path,
                  ca: trustme.CA, redis_url: str | None = None,
                  **overrides: Any) -> Iterator[World]:
    developer_id, org_id = add_developer(sessions)
    app = add_owned_app(sessions, org_id, SLUG, pay_to=PAY_TO,
                        pay_to_status=PayToStatus.TESTING,
                        runtime_domain_request_status=DomainRequestStatus.NOT_REQUESTED)
    with developer_origin(ca) as origin, dns_server() as dns:
        settings = router_settings(db_url, dns_server=f"{dns.host}:{dns.port}",
                                   router_addresses=("127.0.0.1",), redis_url=redis_url,
                                   **overrides)
        settings = replace(settings, base_url=f"http://127.0.0.1:{settings.bind_port}")
        dns.records[f"{SLUG}.{settings.apps_domain}"] = ["127.0.0.1"]
        service = create_app(settings, runtime_ssl_context=client_context(ca))
        with serve_router(service, settings) as url:
            world = World(url, settings.bind_port, settings, sessions, developer_id, app.id,
                          origin, dns, tmp_path)
            try:
                yield world
            finally:
                for client in world.clients:
                    client.close()
