"""Dev mode: the reference app (``examples/reference_app``) as the ``demo`` runtime.

It is configured exactly as a developer's deployment would be, through the spec 4.11
variables, except that the mapping is built here and handed over in-process: the secrets in
it never reach ``os.environ``, a file or the terminal. Its fulfilment store is a SQLite file
in the dev data directory, beside the service's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from starlette.types import ASGIApp, Receive, Scope, Send

from examples.demo_origin import DemoIdentity, demo_origin
from examples.reference_app import Settings as ReferenceSettings
from examples.reference_app import create_app as create_reference_app
from examples.reference_app.catalogue import DEFAULT_ITEMS, Catalogue, Item
from payments.models import Product, ProductStatus
from router.dev import DEMO_PAY_TO, DEMO_SLUG
from router.dev_backend import DemoBackend
from router.settings import Settings

REFERENCE_DB = "reference-app.db"
WEBHOOK_PATH = "/api/svc/webhook"
# Kept from the old demo origin: the headers the origin received, so the router's cookie
# stripping and forwarding headers stay visible in a browser (README).
ECHO_PATHS = frozenset({"/echo"})


def dev_data_dir(settings: Settings) -> Path:
    """Where dev keeps its files: the directory of the SQLite database (``var/``)."""
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        return Path(url.database).resolve().parent
    return Path("var").resolve()


def reference_environ(settings: Settings, backend: DemoBackend, origin: str,
                      data_dir: Path) -> dict[str, str]:
    """The spec 4.11 variables of the demo runtime, plus the SDK's service URLs."""
    runtime_url = settings.runtime_url(DEMO_SLUG)
    return {
        "SVC_APP_ID": backend.app_id,
        "SVC_APP_SLUG": DEMO_SLUG,
        "SVC_PAY_TO": DEMO_PAY_TO,
        "SVC_RUNTIME_ORIGIN": origin,
        "SVC_RUNTIME_APP_PATH": "/",
        "SVC_RETURN_URL": f"{runtime_url}/svc-auth-return?app={DEMO_SLUG}",
        "SVC_WEBHOOK_SECRET": backend.webhook_secret,
        "SVC_API_KEY": backend.api_key,
        "SVC_WEBHOOK_URL": origin + WEBHOOK_PATH,
        "DATABASE_URL": f"sqlite:///{data_dir / REFERENCE_DB}",
        "SVC_API_URL": settings.base_url,
        "SVC_PORTAL_URL": settings.portal_url,
    }


class DemoRuntime:
    """The reference app, with ``/echo`` of the old demo origin beside it."""

    def __init__(self, reference: ASGIApp, echo: ASGIApp) -> None:
        self.reference, self.echo = reference, echo

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in ECHO_PATHS:
            await self.echo(scope, receive, send)
        else:  # the lifespan too: it opens the reference app's store
            await self.reference(scope, receive, send)


def demo_catalogue(sessions: sessionmaker[Session], app_id: str) -> Catalogue:
    """What the page sells, with this database's product ids, which orders and trusted
    charges need (what ``--products FILE`` gives a deployed copy)."""
    wanted = {item.slug for item in DEFAULT_ITEMS}
    with sessions() as session:
        products = session.scalars(select(Product).where(
            Product.app_id == app_id, Product.status == ProductStatus.ACTIVE)).all()
        items = {p.slug: Item(p.slug, p.name, p.price_atomic, p.id)
                 for p in products if p.slug in wanted}
    return Catalogue(items[item.slug] for item in DEFAULT_ITEMS if item.slug in items)


def demo_runtime(settings: Settings, backend: DemoBackend, origin: str,
                 catalogue: Catalogue, data_dir: Path) -> DemoRuntime:
    data_dir.mkdir(parents=True, exist_ok=True)
    environ: Mapping[str, str] = reference_environ(settings, backend, origin, data_dir)
    reference = create_reference_app(ReferenceSettings.from_env(environ), catalogue=catalogue)
    echo = demo_origin(DemoIdentity(backend.app_id, DEMO_SLUG, DEMO_PAY_TO, origin,
                                    settings.portal_url))
    return DemoRuntime(reference, echo)
