"""``create_app(settings)``: the one place that wires the service together."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import redis.asyncio as aioredis
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from manifest import schema as manifest_schema
from manifest.fetch import FetchLimits, OriginClient
from manifest.url_policy import DnsResolver, UrlPolicy
from payments import migrate
from payments.config.api import ConfigApi
from payments.db import make_engine, make_sessionmaker
from payments.developer.api import DeveloperApi
from payments.developer.org_key_api import OrganizationKeyApi
from payments.developer.passwords import Passwords
from payments.developer.services import DeveloperServices
from payments.developer.sessions import SessionPolicy
from payments.errors import EXCEPTION_HANDLERS
from payments.ledger.config import LedgerConfig
from payments.ledger.cors import Cors
from payments.ledger.return_urls import origin_of
from payments.ledger.routes_authorizations import AuthorizationRoutes
from payments.ledger.routes_handoffs import HandoffRoutes
from payments.ledger.routes_lookups import LookupRoutes
from payments.ledger.routes_payments import PaymentRoutes
from payments.ledger.session_lookups import SessionLookups
from payments.mail import CapturingMailer, Mailer, SmtpMailer
from payments.models import App
from payments.ratelimit import InMemoryRateLimiter, RedisRateLimiter
from payments.runtime.api import RuntimeApi, RuntimeServices
from payments.webhooks.api import WebhookApi
from portal.config import PortalConfig
from portal.routes import legacy_launch_routes, portal_app
from router.app_directory import AppDirectory
from router.chain import open_chain, start_workers
from router.chain_params import chain_params
from router.client_address import ClientAddress
from router.fast_path import FastPath
from router.gating import RuntimeRoute
from router.head_policy import HeadPolicy
from router.headers import TrustedProxies
from router.health import Status, healthz
from router.heap import freeze_startup_heap
from router.hosts import HostKind, HostTable
from router.invalidation import ChangeBus, LocalChangeBus, RedisChangeBus
from router.pages import unknown_host_page
from router.resources import Resources
from router.runtime_host import RuntimeHost
from router.settings import Settings
from router.upstream import make_session
from router.webhooks import WebhookWorkers, webhook_services

log = logging.getLogger(__name__)


def lookup_route(sessions: sessionmaker[Session], slug: str) -> RuntimeRoute | None:
    with sessions() as session:
        app = session.scalar(select(App).where(App.slug == slug))
        return None if app is None else RuntimeRoute.from_app(app)


class Service:
    """The ASGI application: lifespan plus dispatch on the ``Host`` header.

    Dispatch is a dictionary lookup rather than Starlette's ``Host`` routes so the
    runtime proxy, the hot path, pays for no regex or middleware it does not use.
    """

    def __init__(self, settings: Settings, resources: Resources,
                 hosts: dict[HostKind, ASGIApp], runtime: RuntimeHost) -> None:
        self.settings = settings
        self.resources = resources
        self._table = HostTable(settings)
        self.hosts = hosts
        self._runtime = runtime
        # Read by both HTTP protocols (router/server_protocol.py): every head's limits.
        self.head_policy = HeadPolicy(settings.head_limits, self._table)
        # Read by router/fast_protocol.py: the runtime requests it serves below ASGI.
        self.fast_path = (FastPath(settings, self._table, resources, runtime.http)
                          if settings.proxy_fast_path else None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        host = None
        for name, value in scope["headers"]:
            if name == b"host":
                host = value.decode("latin-1")
                break
        target = self._table.classify(host)
        if target.kind is HostKind.RUNTIME and target.slug is not None:
            await self._runtime(scope, receive, send, target.slug)
            return
        app = self.hosts.get(target.kind)
        if app is None:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await unknown_host_page()(scope, receive, send)
            return
        await app(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        assert message["type"] == "lifespan.startup"
        stack = contextlib.AsyncExitStack()
        try:
            await stack.enter_async_context(open_resources(self.settings, self.resources))
        except Exception as exc:
            log.exception("startup failed")
            await send({"type": "lifespan.startup.failed", "message": str(exc)})
            return
        freeze_startup_heap()
        await send({"type": "lifespan.startup.complete"})
        message = await receive()
        assert message["type"] == "lifespan.shutdown"
        await stack.aclose()
        await send({"type": "lifespan.shutdown.complete"})


@contextlib.asynccontextmanager
async def open_resources(settings: Settings, resources: Resources) -> AsyncIterator[Resources]:
    """Open the engine, Redis, the change bus, the app directory and the HTTP pool."""
    engine = make_engine(settings.database_url, pool_size=settings.db_pool_size,
                         max_overflow=settings.db_max_overflow)
    try:
        # Dev migrates; elsewhere a schema behind this code is refused (SchemaBehind), and
        # one ahead of it is run on: the rolling upgrade's old instances, a code rollback.
        schema = (migrate.upgrade_unless_ahead(engine) if settings.dev
                  else migrate.require_usable(engine))
        if schema.state is migrate.SchemaState.AHEAD:
            log.warning("%s", schema.describe())
        resources.engine = engine
        resources.sessions = make_sessionmaker(engine)
        bus: ChangeBus
        if settings.redis_url:
            resources.redis = aioredis.Redis.from_url(settings.redis_url)
            bus = RedisChangeBus(resources.redis)
        else:
            bus = LocalChangeBus()
        sessions = resources.sessions

        def ttl() -> float:
            # Long-lived entries only while pub/sub can tell us about changes.
            connected = bus.connected
            return settings.app_cache_ttl_shared if connected else settings.app_cache_ttl_local

        directory = AppDirectory(lambda slug: lookup_route(sessions, slug), ttl)
        bus.subscribe(directory.invalidate)
        resources.bus, resources.directory = bus, directory
        resources.limiter = (RedisRateLimiter(resources.redis) if resources.redis is not None
                             else InMemoryRateLimiter())
        await bus.start()
        resources.http = make_session(settings, ssl_context=resources.origin_tls)
        chain = await asyncio.to_thread(open_chain, settings, chain_params(settings), sessions,
                                        resources.dev_chain_state)
        resources.chain = chain.reads
        if chain.gateway is not None:  # only with chain workers: the one thing that signs
            resources.workers = start_workers(settings, sessions, chain.gateway)
            resources.relayer = chain.relayer
        resources.webhooks = await WebhookWorkers.start(settings, engine, sessions)
        yield resources
    finally:
        if resources.webhooks is not None:
            await resources.webhooks.stop()  # in-flight requests get a grace, the rest go back
            resources.webhooks = None
        if resources.workers is not None:
            await resources.workers.stop()  # lets a running cycle finish with the engine
        if resources.http is not None:
            await resources.http.close()
        if resources.bus is not None:
            await resources.bus.stop()
        if resources.redis is not None:
            await resources.redis.aclose()
        engine.dispose()
        resources.http = resources.bus = resources.redis = resources.directory = None
        resources.limiter = resources.chain = resources.workers = resources.relayer = None
        resources.engine = resources.sessions = None


def make_mailer(settings: Settings) -> Mailer:
    if settings.smtp_host:
        return SmtpMailer(settings.smtp_host, settings.smtp_port, settings.smtp_from,
                          username=settings.smtp_username, password=settings.smtp_password,
                          starttls=settings.smtp_starttls)
    # Dev only (production settings require SMTP): codes are printed by `svc-server dev`.
    return CapturingMailer(echo=lambda text: print(text, flush=True))


def developer_services(settings: Settings, resources: Resources,
                       mailer: Mailer) -> DeveloperServices:
    policy = SessionPolicy(idle=timedelta(seconds=settings.console_session_idle_seconds),
                           absolute=timedelta(seconds=settings.console_session_absolute_seconds))
    return DeveloperServices(
        sessions=resources.session_factory, limiter=resources.rate_limiter, mailer=mailer,
        passwords=Passwords(), policy=policy, base_url=settings.base_url,
        console_url=settings.console_url, cookies=settings.cookies,
        client_address=ClientAddress(TrustedProxies(settings.trusted_proxies)),
        workers=anyio.CapacityLimiter(settings.db_workers),
    )


def runtime_services(settings: Settings, resources: Resources, developer: DeveloperServices,
                     ssl_context: ssl.SSLContext | None = None) -> RuntimeServices:
    """Runtime verification: the shared origin policy, DNS, and whose certificates count
    (the system's trust store unless a test passes its own CA)."""
    nameserver, port = settings.dns_nameserver or (None, 53)
    resolver = DnsResolver(nameserver, port, timeout=settings.runtime_fetch_timeout)
    client = OriginClient(UrlPolicy.from_settings(settings), resolver,
                          ssl_context or ssl.create_default_context(),
                          FetchLimits(timeout=settings.runtime_fetch_timeout,
                                      max_body_bytes=settings.runtime_manifest_max_bytes))

    async def publish(slug: str) -> None:
        await resources.change_bus().publish(slug)

    return RuntimeServices(developer=developer, client=client,
                           runtime_url=settings.runtime_url, apps_domain=settings.apps_domain,
                           publish=publish, verifiers=anyio.CapacityLimiter(8))


def ledger_config(settings: Settings) -> LedgerConfig:
    return LedgerConfig(
        base_url=settings.base_url, portal_url=settings.portal_url,
        apps_domain=settings.apps_domain, apps_scheme=settings.apps_scheme,
        runtime_url=settings.runtime_url, params=chain_params(settings),
        secret_key=settings.secret_key,
        summary_ttl=timedelta(seconds=settings.summary_code_ttl_seconds),
        payment_ttl=timedelta(seconds=settings.payment_code_ttl_seconds),
        handoff_ttl=timedelta(seconds=settings.handoff_ttl_seconds),
    )


def _api_host(settings: Settings, resources: Resources, developer: DeveloperServices,
              runtime: RuntimeServices) -> Starlette:
    api = DeveloperApi(developer, settings.runtime_url, accept_session=False,
                       url_policy=UrlPolicy.from_settings(settings))
    config = ledger_config(settings)
    cors = Cors(origin_of(settings.portal_url), settings.apps_domain, settings.apps_scheme)
    return Starlette(routes=[
        Route("/healthz", healthz, methods=["GET", "HEAD"]),
        Route("/statusz", Status(settings, resources).endpoint, methods=["GET", "HEAD"]),
        *api.routes(),
        *RuntimeApi(runtime, accept_session=False).routes(),
        *WebhookApi(webhook_services(settings, developer, chain_params(settings)),
                    accept_session=False).routes(),
        *ConfigApi(webhook_services(settings, developer, chain_params(settings)),
                   settings.runtime_url, runtime.publish, accept_session=False).routes(),
        *AuthorizationRoutes(developer, config, cors).routes(),
        *PaymentRoutes(developer, config, cors).routes(),
        *LookupRoutes(developer, config).routes(),
        *HandoffRoutes(developer, config).routes(),
    ], exception_handlers=EXCEPTION_HANDLERS)


def _portal_host(settings: Settings, resources: Resources,
                 developer: DeveloperServices) -> Starlette:
    return portal_app(PortalConfig(services=developer, ledger=ledger_config(settings),
                                   dev=settings.dev, chain=lambda: resources.chain))


def _console_host(settings: Settings, developer: DeveloperServices,
                  runtime: RuntimeServices) -> Starlette:
    from portal.console.routes import console_routes

    api = DeveloperApi(developer, settings.runtime_url, accept_session=True,
                       url_policy=UrlPolicy.from_settings(settings))
    lookups = SessionLookups(developer, chain_params(settings))
    hooks = webhook_services(settings, developer, chain_params(settings))
    return Starlette(routes=[*console_routes(developer, settings.runtime_url, hooks),
                             *api.routes(),
                             *OrganizationKeyApi(developer).routes(),
                             *RuntimeApi(runtime, accept_session=True).routes(),
                             *WebhookApi(hooks, accept_session=True).routes(),
                             *ConfigApi(hooks, settings.runtime_url, runtime.publish,
                                        accept_session=True).routes(),
                             *lookups.routes()],
                     exception_handlers=EXCEPTION_HANDLERS)


def _docs_host(settings: Settings) -> Starlette:
    from payments import schemas
    from payments.openapi import openapi_document

    async def openapi(request: object) -> JSONResponse:
        return JSONResponse(openapi_document(settings.base_url, settings.portal_url,
                                             dev=settings.dev,
                                             console_url=settings.console_url))

    def schema_route(name: str) -> Route:
        # Built once: the packaged file with this deployment's {docs_url} as its $id.
        body = (manifest_schema.published_schema(settings.docs_url)
                if name == manifest_schema.FILE_NAME
                else schemas.published_schema(name, settings.docs_url))

        async def serve(request: object) -> JSONResponse:
            return JSONResponse(body, media_type=schemas.MEDIA_TYPE,
                                headers={"cache-control": "public, max-age=300",
                                         "access-control-allow-origin": "*"})
        return Route(f"/{name}", serve, methods=["GET", "HEAD"])

    described = {
        "openapi.json": "the HTTP API of every host: paths, bodies, scopes, error codes",
        schemas.WEBHOOK_EVENT: "the body of every webhook event (spec 2.1)",
        schemas.CONFIG: "the developer config file of `svc config` (spec 2.9)",
        manifest_schema.FILE_NAME: "the runtime manifest, /.well-known/svc.json (spec 2.8)",
    }
    listing = {"documents": [{"url": f"{settings.docs_url}/{name}", "describes": what}
                             for name, what in described.items()]}

    async def index(request: Request) -> JSONResponse:
        # What this host serves, so that its root is not a bare 404.
        return JSONResponse(listing, headers={"access-control-allow-origin": "*"})

    return Starlette(routes=[Route("/", index, methods=["GET", "HEAD"]),
                             Route("/openapi.json", openapi, methods=["GET", "HEAD"]),
                             *(schema_route(name) for name in schemas.SCHEMA_FILES),
                             schema_route(manifest_schema.FILE_NAME)],
                     exception_handlers=EXCEPTION_HANDLERS)


def create_app(settings: Settings, *, mailer: Mailer | None = None,
               developer_overrides: Mapping[str, Any] | None = None,
               runtime_ssl_context: ssl.SSLContext | None = None,
               dev_chain_state: Path | None = None) -> Service:
    """The service. ``developer_overrides`` replaces fields of :class:`DeveloperServices`
    (a clock, rate limits, a limiter) for tests that must not wait for real time;
    ``runtime_ssl_context`` decides whose certificates developer origins must present, to
    the proxy and to runtime verification (default: the system's; tests pass their CA);
    ``dev_chain_state`` is where ``svc-server dev`` keeps its in-process chain between
    runs (router/dev_chain.py; None: the chain lives as long as the process)."""
    resources = Resources(origin_tls=runtime_ssl_context, dev_chain_state=dev_chain_state)
    developer = developer_services(settings, resources, mailer or make_mailer(settings))
    if developer_overrides:
        developer = replace(developer, **developer_overrides)
    runtime = runtime_services(settings, resources, developer, runtime_ssl_context)
    hosts: dict[HostKind, ASGIApp] = {
        HostKind.API: _api_host(settings, resources, developer, runtime),
        HostKind.PORTAL: _portal_host(settings, resources, developer),
        HostKind.CONSOLE: _console_host(settings, developer, runtime),
        HostKind.DOCS: _docs_host(settings),
        HostKind.LEGACY_LAUNCH: Starlette(routes=legacy_launch_routes(settings.portal_url)),
    }
    return Service(settings, resources, hosts, RuntimeHost(settings, resources))
