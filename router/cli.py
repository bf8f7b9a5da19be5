"""``svc-server dev`` and ``svc-server serve``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import uvicorn

from router import native
from router.dev_lock import DataDirInUse, holding
from router.heap import startup_collection_paused
from router.processes import Supervisor
from router.server_logs import (
    configure_logging,
    configure_logging_from_environment,
    uvicorn_log_config,
)
from router.settings import ENV_PREFIX, Settings, SettingsError, load_settings
from router.settings_checks import production_warnings
from svc.int_flags import whole_number

if TYPE_CHECKING:
    from router.app import Service

# The service (router.app) and the dev seeding are imported by the functions that build
# them, not here: the parent of `SVCSRV_PROCESSES` > 1 serves nothing itself, and importing
# them there (web3, eth-account, SQLAlchemy's models, every route) cost it about 1.3 s of
# CPU at each start (bench/startup_bench.py).

log = logging.getLogger(__name__)
# Which uvicorn server of `svc-server dev` a log record comes from: each serves in a task of
# its own, and a task keeps the context it set.
_DEMO_SERVER: ContextVar[bool] = ContextVar("svc_dev_demo_server", default=False)


class QuietDemoServer(logging.Filter):
    """Keeps the demo app's server to warnings, as its ``log_level`` says. uvicorn logs
    every server's start and stop on one process-wide logger (``uvicorn.error``), whose
    level the service's server sets to info: without this each line is printed twice."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or not _DEMO_SERVER.get()


async def serve_demo(server: uvicorn.Server, sock: socket.socket) -> None:
    _DEMO_SERVER.set(True)  # this task only (asyncio.gather gave it its own context)
    await server.serve(sockets=[sock])


def server_config(app: Any, settings: Settings, **extra: Any) -> uvicorn.Config:
    # The fast path's protocol imports the whole service: here, only where one is served.
    from router.fast_protocol import http_protocol

    extra.setdefault("log_level", "info")
    # Both HTTP paths close a client's connection after this long idle.
    extra.setdefault("timeout_keep_alive", settings.keep_alive_timeout)
    return uvicorn.Config(
        app, host=settings.bind_host, port=settings.bind_port, loop="uvloop",
        # the runtime fast path, then uvicorn's httptools (router/fast_protocol.py)
        http=cast(type[asyncio.Protocol], http_protocol),
        ws="websockets-sansio", lifespan="on",
        # The proxy relays the origin's own Server/Date headers; ours would duplicate them.
        server_header=False, date_header=False,
        # Forwarded headers are judged by router.headers against trusted_proxies, not here.
        proxy_headers=False,
        # Query strings can carry short-lived codes (svc-auth-return); no access log
        # line is written rather than a redacted one we might get wrong.
        access_log=False,
        # uvicorn's own handler, with the mask every line passes (router/server_logs.py).
        log_config=uvicorn_log_config(), **extra,
    )


def create_app(settings: Settings, dev_chain_state: Path | None = None) -> Service:
    """The service (router.app.create_app), imported here at the first call: only a process
    that serves builds it (see above). A module-level name, so a test can replace it."""
    from router.app import create_app as build

    return build(settings, dev_chain_state=dev_chain_state)


def service_from_environment() -> Service:
    """The app factory each process of a multi-process ``svc-server serve`` imports: the
    parent checked the same ``SVCSRV_*`` variables before starting it, and the process set
    up its logging before uvicorn called this (router/processes.py, _serve_one)."""
    return create_app(load_settings())


def process_config() -> uvicorn.Config:
    """The uvicorn config each process of a multi-process ``svc-server serve`` builds for
    itself, from the variables the parent checked; its app is the factory above."""
    return server_config(f"{__name__}:{service_from_environment.__name__}", load_settings(),
                         factory=True)


def serve(settings: Settings) -> int:
    """Serve until SIGINT/SIGTERM; exit code 3 when the service could not start (old schema,
    port in use...). With ``settings.processes`` > 1, that many processes share the port
    (router/processes.py)."""
    if settings.processes == 1:
        # A start that fails (old schema, port in use) exits with uvicorn's code 3.
        with startup_collection_paused():  # until the lifespan freezes the heap
            uvicorn.Server(server_config(create_app(settings), settings)).run()
        return 0
    if settings.dev:
        # Dev migrates at start; done once here, the processes find the schema current
        # instead of racing each other's DDL.
        from payments import migrate
        from payments.db import make_engine

        engine = make_engine(settings.database_url, pool_size=settings.db_pool_size,
                         max_overflow=settings.db_max_overflow)
        try:
            migrate.upgrade_unless_ahead(engine)
        finally:
            engine.dispose()
    return Supervisor(settings.bind_host, settings.bind_port, settings.processes,
                      process_config, configure_logging_from_environment).run()


def report_native() -> None:
    """Say whether the fast path runs compiled (router/native.py)."""
    state = native.status()
    if state == "stale":
        log.warning("the compiled fast path is older than its sources and runs the code from "
                    "before: run scripts/build_native.py (or scripts/install.sh)")
    else:
        log.info("fast path: %s", "compiled (mypyc)" if state == "compiled" else "pure Python")


def mode_line(settings: Settings) -> str:
    """One line saying what this server runs as: dev is easy to start by mistake (it is what
    an unset SVCSRV_MODE means), and it migrates at start and mounts the dev wallet."""
    from sqlalchemy.engine import make_url

    parts = (f"database {make_url(settings.database_url).get_backend_name()}, chain "
             f"{settings.chain_backend}, {settings.processes} process"
             + ("es" if settings.processes > 1 else ""))
    if settings.dev:
        return (f"mode: dev ({ENV_PREFIX}MODE unset or dev; {parts}): migrates at start and "
                "serves the dev wallet; not for production")
    return f"mode: production ({parts})"


def report_mode(settings: Settings) -> None:
    log.log(logging.WARNING if settings.dev else logging.INFO, "%s", mode_line(settings))
    for warning in production_warnings(settings):
        log.warning("%s", warning)


def dev_settings(port: int) -> Settings:
    base = f"localhost:{port}"
    return load_settings(
        mode="dev", bind_port=port, apps_port=port,
        base_url=f"http://api.{base}", portal_url=f"http://portal.{base}",
        console_url=f"http://console.{base}", docs_url=f"http://docs.{base}",
    )


class PortInUse(Exception):
    """The address ``svc-server dev`` was to listen on is taken (another dev server?)."""


def check_port_free(host: str, port: int) -> None:
    """Bind the service's address once before anything is migrated or printed: a port in
    use is then one clear line naming ``--port``, not uvicorn's traceback after a list of
    URLs that another server answers. uvicorn binds it again itself (handed a socket, it
    would not print the "Uvicorn running on" line people look for)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # as uvicorn binds: a restart is not refused by the last run's TIME_WAIT connections
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise PortInUse(
                f"cannot listen on {host}:{port} ({exc.strerror}); another svc-server dev "
                f"may be running there. Pick another port: svc-server dev --port {port + 1} "
                f"(bash scripts/dev.sh --port {port + 1}).") from None


async def run_dev(settings: Settings) -> None:
    """The service and the reference app as the ``demo`` runtime, both on loopback. The
    in-server webhook and chain workers deliver ``payment.delivered`` and, once the batch
    settles on the in-process chain, ``payment.settled`` to the app."""
    check_port_free(settings.bind_host, settings.bind_port)
    from router.dev_runtime import dev_data_dir

    with holding(dev_data_dir(settings)):  # one svc-server dev per var/: its ledger, its chain
        await _serve_dev(settings)


async def _serve_dev(settings: Settings) -> None:
    from payments import migrate
    from payments.db import make_engine, make_sessionmaker
    from router.dev import seed_demo
    from router.dev_backend import seed_demo_backend
    from router.dev_chain import STATE_FILE
    from router.dev_runtime import WEBHOOK_PATH, demo_catalogue, demo_runtime, dev_data_dir

    engine = make_engine(settings.database_url, pool_size=settings.db_pool_size,
                         max_overflow=settings.db_max_overflow)
    migrate.upgrade_unless_ahead(engine)
    demo_socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    demo_socket.bind(("127.0.0.1", 0))
    origin = f"http://127.0.0.1:{demo_socket.getsockname()[1]}"
    sessions = make_sessionmaker(engine)
    app_id = seed_demo(sessions, origin)
    backend = seed_demo_backend(sessions, settings, app_id, origin + WEBHOOK_PATH)
    catalogue = demo_catalogue(sessions, app_id)
    engine.dispose()
    data_dir = dev_data_dir(settings)
    runtime = demo_runtime(settings, backend, origin, catalogue, data_dir)
    demo = uvicorn.Server(uvicorn.Config(runtime, log_level="warning", access_log=False,
                                         lifespan="on", log_config=uvicorn_log_config()))
    # The in-process chain is kept beside the ledger and taken up again at the next start
    # (router/dev_chain.py); the server says at start if it could not be.
    service = create_app(settings, dev_chain_state=data_dir / STATE_FILE)
    main = uvicorn.Server(server_config(service, settings))
    print_dev_urls(settings, origin)
    quiet = QuietDemoServer()
    uvicorn_log = logging.getLogger("uvicorn.error")
    uvicorn_log.addFilter(quiet)
    try:
        await asyncio.gather(serve_demo(demo, demo_socket), main.serve())
    finally:
        uvicorn_log.removeFilter(quiet)


def print_dev_urls(settings: Settings, origin: str) -> None:
    from router.dev import DEMO_SLUG
    from router.dev_runtime import WEBHOOK_PATH

    runtime = settings.runtime_url(DEMO_SLUG)
    lines = [
        "",
        "Dev service on embedded defaults (SQLite, in-process cache and chain). Open:",
        f"  reference app      {runtime}/  (the demo runtime: buy, delivered, settled)",
        f"  cookie/header echo {runtime}/echo",
        f"  hosted entry       {settings.portal_url}/{DEMO_SLUG}",
        f"  account            {settings.portal_url}/account",
        f"  developer console  {settings.console_url}/signup",
        f"  API status         {settings.base_url}/statusz",
        f"  OpenAPI            {settings.docs_url}/openapi.json",
        f"  demo origin        {origin}  (its webhook: {origin}{WEBHOOK_PATH})",
        "",
    ]
    print("\n".join(lines), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="svc-server")
    sub = parser.add_subparsers(dest="command", required=True)
    dev = sub.add_parser("dev", help="run everything on loopback with a seeded demo app")
    dev.add_argument("--port", type=whole_number, default=8000)
    sub.add_parser("serve", help=f"run the server with settings from {ENV_PREFIX}* variables")
    args = parser.parse_args(argv)
    try:
        settings = dev_settings(args.port) if args.command == "dev" else load_settings()
        configure_logging(settings)  # first: from here on every line passes the mask
        report_native()
        if args.command == "dev":
            with startup_collection_paused():  # until the lifespan freezes the heap
                asyncio.run(run_dev(settings))
        else:
            report_mode(settings)
            return serve(settings)
    except SettingsError as exc:
        print(f"svc-server: {exc}", file=sys.stderr)
        return 2
    except (PortInUse, DataDirInUse) as exc:
        print(f"svc-server: {exc}", file=sys.stderr)
        return 3  # as `serve` exits when uvicorn cannot bind
    except KeyboardInterrupt:
        pass
    except Exception:
        # Python would print the traceback itself, and a library's exception may hold a
        # secret (a URL with its password): logged, it passes the mask.
        log.exception("svc-server stopped on an error")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
