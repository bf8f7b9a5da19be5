"""A real router (uvicorn on loopback) in front of real upstream servers."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from payments.db import make_engine, make_sessionmaker
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


def router_settings(db_url: str, **overrides: Any) -> Settings:
    port = free_port()
    base = Settings(
        mode="dev", database_url=db_url, bind_port=port, apps_port=port,
        base_url=f"http://api.localhost:{port}", portal_url=f"http://portal.localhost:{port}",
        console_url=f"http://console.localhost:{port}", docs_url=f"http://docs.localhost:{port}",
        proxy_connect_timeout=2.0, proxy_read_timeout=5.0,
    )
    return replace(base, **overrides)


RouterFactory = Callable[..., AbstractContextManager[RunningRouter]]


def router_factory(db_url: str) -> RouterFactory:
    @contextmanager
    def start(**overrides: Any) -> Iterator[RunningRouter]:
        settings = router_settings(db_url, **overrides)
        service = create_app(settings)
        with serve_router(service, settings) as url:
            yield RunningRouter(url, settings.bind_port, service, settings)
    return start


@pytest.fixture
def start_router(db_url: str) -> RouterFactory:
    """``with start_router(**setting_overrides) as router:``, on SQLite and PostgreSQL."""
    return router_factory(db_url)


@pytest.fixture
def proxy_db_url(sqlite_template: Path, tmp_path: Path) -> str:
    """Proxy behaviour does not depend on the backend: these tests run on SQLite only."""
    path = tmp_path / "svc.db"
    shutil.copy(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def proxy_sessions(proxy_db_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(proxy_db_url)
    yield make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture
def start_proxy_router(proxy_db_url: str) -> RouterFactory:
    """Like ``start_router`` but on SQLite only; pair with ``proxy_sessions``."""
    return router_factory(proxy_db_url)
