"""Run the real service (``create_app`` under uvicorn) on a loopback port for a test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from typing import Any

import httpx

from router.app import Service, create_app
from router.settings import Settings
from tests.support.servers import serve_router
from tests.support.services import free_port


@dataclass
class RunningRouter:
    url: str  # http://127.0.0.1:PORT
    port: int
    service: Service
    settings: Settings

    def host(self, slug: str) -> str:
        return f"{slug}.{self.settings.apps_domain}:{self.port}"

    def client(self, slug: str, **kwargs: Any) -> httpx.Client:
        """An httpx client addressing ``<slug>.{apps_domain}`` through the router."""
        return httpx.Client(base_url=self.url, headers={"host": self.host(slug)},
                            follow_redirects=False, timeout=30, **kwargs)

    def api(self, token: str | None = None) -> httpx.Client:
        """A client of the API host, with ``token`` (a ``zcli_`` grant, a ``zpk_`` key) as
        its bearer when given."""
        headers = {"host": f"api.localhost:{self.port}"}
        if token:
            headers["authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=10)


def router_settings(db_url: str, **overrides: Any) -> Settings:
    port = free_port()
    base = Settings(
        mode="dev", database_url=db_url, bind_port=port, apps_port=port,
        base_url=f"http://api.localhost:{port}", portal_url=f"http://portal.localhost:{port}",
        console_url=f"http://console.localhost:{port}", docs_url=f"http://docs.localhost:{port}",
        proxy_connect_timeout=2.0, proxy_read_timeout=5.0,
        # Background settlement would change ledger rows under a test's feet; the chain
        # tests turn it on where they want it.
        chain_workers=False,
        # Likewise the webhook dispatcher (it would mark events of apps without an endpoint
        # skipped); the webhook tests and the portal's end-to-end test turn it on.
        webhook_workers=False,
    )
    return replace(base, **overrides)


RouterFactory = Callable[..., AbstractContextManager[RunningRouter]]


def router_factory(db_url: str) -> RouterFactory:
    @contextmanager
    def start(*, app_options: dict[str, Any] | None = None,
              **overrides: Any) -> Iterator[RunningRouter]:
        """``overrides`` are settings; ``app_options`` go to ``create_app`` (e.g. the
        ``runtime_ssl_context`` that trusts a test CA)."""
        settings = router_settings(db_url, **overrides)
        service = create_app(settings, **(app_options or {}))
        with serve_router(service, settings) as url:
            yield RunningRouter(url, settings.bind_port, service, settings)
    return start
