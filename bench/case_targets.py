"""What bench/proxy_cases.py starts on 127.0.0.1 (and stops, by pid): the origins, and the
two proxies under test in front of them, configured alike.

- upstream: nginx (1 worker) answering ``/1m`` with a 1 MiB file and every other path,
  any method, with the 1,024-byte body of bench/proxy_bench.py (``/close`` closing its
  connection after it);
- slow origin and WebSocket echo origin: bench/case_origins.py, one process each;
- Redis (the router's app cache invalidation, as production uses it);
- nginx proxy: ``worker_processes`` = the cores, one ``server`` per app name
  (``bench``/``fast`` -> upstream, ``slow`` -> slow origin, ``ws`` -> echo origin);
- router: ``router.cli.serve`` (what ``svc-server serve`` runs), ``SVCSRV_PROCESSES`` = the
  cores, the same four apps seeded with the same origins.

Both keep idle client connections 75 s (nginx's default ``keepalive_timeout``;
``SVCSRV_KEEP_ALIVE_TIMEOUT=75``) and up to 512 idle origin connections per worker or
process (the router's ``SVCSRV_PROXY_POOL_SIZE`` default; nginx ``keepalive 512``).
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from proxy_bench import (
    BODY,
    ROOT,
    _family,
    fetch,
    nginx_conf,
    nginx_user,
    router_env,
    start_nginx,
    wait_listening,
)

from ops.cluster.processes import Proc, Processes, free_port

BIG = BODY * 1024  # 1 MiB
KEEP_ALIVE = 75
APP_SLUGS = ("bench", "fast", "slow", "ws")
OPEN_FILES = 65536

OPEN_FILES_MAIN = """\
# 10,000 client connections (case 3) may all land on one worker, with its origin
# connections: as many as the open-file limit the bench runs under allows.
worker_rlimit_nofile {open_files};
"""

UPSTREAM = """\
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        default_type text/plain;
        location = /1m {{ alias {big}; }}
        # Closes after its answer: every request for it needs a new origin connection
        # (bench/connection_cpu.py).
        location = /close {{ keepalive_timeout 0; return 200 "{payload}"; }}
        location / {{ return 200 "{payload}"; }}
    }}
"""

FORWARD = """proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-Host $http_host;"""

PROXY = """\
    # A 16 KB request body is held in memory, as the router holds it (the x86-64 default
    # of 8 KB would write it to a temporary file first).
    client_body_buffer_size 64k;
    upstream bench_upstream {{
        server 127.0.0.1:{upstream_port}; keepalive 512; keepalive_requests 1000000;
    }}
    upstream slow_upstream {{
        server 127.0.0.1:{slow_port}; keepalive 512; keepalive_requests 1000000;
    }}
    upstream ws_upstream {{ server 127.0.0.1:{ws_port}; }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        server_name bench.apps.localhost fast.apps.localhost;
        location / {{
            proxy_pass http://bench_upstream;
            {forward}
        }}
    }}
    server {{
        listen 127.0.0.1:{port};
        server_name slow.apps.localhost;
        location / {{
            proxy_pass http://slow_upstream;
            {forward}
        }}
    }}
    server {{
        listen 127.0.0.1:{port};
        server_name ws.apps.localhost;
        location / {{
            proxy_pass http://ws_upstream;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection "upgrade";
            proxy_read_timeout 1h;
        }}
    }}
"""


def nginx_text(prefix: Path | str, body: str, workers: int | str, user: str = "",
               open_files: int | str | None = None) -> str:
    if open_files is None:
        open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    connections = open_files - 100 if isinstance(open_files, int) else "<that - 100>"
    return nginx_conf(prefix, body, workers, user=user,
                      main=OPEN_FILES_MAIN.format(open_files=open_files),
                      connections=connections,
                      http_extra=f"    keepalive_timeout {KEEP_ALIVE}s;\n")


def proxy_body(port: int | str, upstream_port: int | str, slow_port: int | str,
               ws_port: int | str) -> str:
    return PROXY.format(port=port, upstream_port=upstream_port, slow_port=slow_port,
                        ws_port=ws_port, forward=FORWARD.replace("\n", "\n    "))


def extra_router_env() -> dict[str, str]:
    return {"SVCSRV_KEEP_ALIVE_TIMEOUT": str(KEEP_ALIVE)}


def raise_open_files() -> int:
    """RLIMIT_NOFILE for this process and all it starts (wrk, the servers, the clients),
    up to ``OPEN_FILES``; the limit now in force (a container may cap the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < OPEN_FILES:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, max(hard, OPEN_FILES)))
        except (ValueError, OSError):  # not allowed above the hard limit
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, OPEN_FILES), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


@dataclass
class Target:
    key: str
    label: str
    proc: Proc
    port: int

    def host(self, slug: str) -> str:
        return f"{slug}.apps.localhost:{self.port}"


@dataclass
class Bed:
    tmp: Path
    processes: int
    redis_url: str
    upstream: Proc
    upstream_port: int
    slow: Proc
    slow_port: int
    ws: Proc
    ws_port: int
    python_env: dict[str, str]

    def origin_of(self, slug: str) -> str:
        port = {"slow": self.slow_port, "ws": self.ws_port}.get(slug, self.upstream_port)
        return f"http://127.0.0.1:{port}"


def wait_port(proc: Proc, port: int, timeout: float = 30) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited:\n{proc.tail()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{proc.name} not listening on {port}:\n{proc.tail()}")


def wait_answering(target: Target, timeout: float = 60) -> None:
    """Until the 1 KB app answers 200 with exactly its body through ``target``."""
    deadline, last = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        if not target.proc.alive():
            raise RuntimeError(f"{target.label} exited:\n{target.proc.tail()}")
        try:
            status, body = fetch(target.port, target.host("bench"))
        except OSError as exc:
            last = str(exc)
            time.sleep(0.2)
            continue
        if status == 200 and body == BODY:
            return
        raise RuntimeError(f"{target.label} answered {status}, {len(body)} bytes: {body[:200]!r}")
    raise RuntimeError(f"{target.label} not answering ({last}):\n{target.proc.tail()}")


@contextmanager
def bed(processes: int) -> Iterator[Bed]:
    """The origins and Redis, shared by every case and both proxies."""
    from tests.support.services import redis_server

    procs, stack = Processes(), contextlib.ExitStack()
    tmp = Path(tempfile.mkdtemp(prefix="proxy-cases-"))
    tmp.chmod(0o755)
    try:
        (tmp / "1m.bin").write_bytes(BIG)
        (tmp / "1m.bin").chmod(0o644)
        up_port, slow_port, ws_port = free_port(), free_port(), free_port()
        upstream = start_nginx(procs, "upstream nginx", tmp / "upstream", nginx_text(
            tmp / "upstream", UPSTREAM.format(port=up_port, big=tmp / "1m.bin",
                                              payload=BODY.decode()), 1, nginx_user()))
        env = {k: v for k, v in os.environ.items() if not k.startswith("SVCSRV_")}
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        origins = [sys.executable, str(Path(__file__).with_name("case_origins.py"))]
        slow = procs.start("slow origin", [*origins, "slow", "--port", str(slow_port)],
                           tmp / "slow.log", env=env)
        ws = procs.start("ws origin", [*origins, "ws", "--port", str(ws_port)],
                         tmp / "ws.log", env=env)
        for proc, port in ((upstream, up_port), (slow, slow_port), (ws, ws_port)):
            wait_port(proc, port)
        redis_url = stack.enter_context(redis_server())
        yield Bed(tmp, processes, redis_url, upstream, up_port, slow, slow_port, ws, ws_port,
                  env)
    finally:
        procs.stop_all()
        stack.close()
        shutil.rmtree(tmp, ignore_errors=True)


def start_nginx_proxy(bed: Bed, procs: Processes) -> Target:
    port = free_port()
    prefix = bed.tmp / f"proxy-{port}"
    proc = start_nginx(procs, "nginx proxy", prefix, nginx_text(prefix, proxy_body(
        port, bed.upstream_port, bed.slow_port, bed.ws_port), bed.processes, nginx_user()))
    target = Target("nginx", f"nginx proxy, {bed.processes} workers", proc, port)
    wait_answering(target)
    return target


def start_router(bed: Bed, procs: Processes) -> Target:
    port = free_port()
    apps = [f"{slug}={bed.origin_of(slug)}" for slug in APP_SLUGS]
    env = {**bed.python_env, **router_env(port, bed.tmp / f"router-{port}.db", bed.redis_url,
                                          bed.processes), **extra_router_env()}
    proc = procs.start("router", [sys.executable, str(Path(__file__).with_name(
        "proxy_cases.py")), "--serve-router", *apps], bed.tmp / f"router-{port}.log",
        cwd=str(ROOT), env=env)
    target = Target("router", f"router, SVCSRV_PROCESSES={bed.processes}", proc, port)
    wait_answering(target)
    wait_listening(proc, port, bed.processes)
    return target


def origin_target(key: str, label: str, proc: Proc, port: int) -> Target:
    return Target(key, label, proc, port)


def serve_router(apps: list[str]) -> None:
    """In the router's process: migrate, seed ``slug=origin`` apps, serve."""
    from payments import migrate
    from payments.db import make_engine, make_sessionmaker, transaction
    from payments.models import App, DomainRequestStatus, ListingStatus, RuntimeStatus
    from router.cli import serve
    from router.settings import load_settings

    settings = load_settings()
    engine = make_engine(settings.database_url)
    try:
        migrate.upgrade(engine)
        with transaction(make_sessionmaker(engine)) as session:
            for slug, _, origin in (app.partition("=") for app in apps):
                session.add(App(name=slug.title(), slug=slug, runtime_origin=origin,
                                runtime_status=RuntimeStatus.ACTIVE,
                                runtime_domain_request_status=DomainRequestStatus.APPROVED,
                                portal_listing_status=ListingStatus.LISTED))
    finally:
        engine.dispose()
    serve(settings)


def rss_kb(pid: int) -> int:
    """Resident memory of ``pid`` and its direct children (workers), in KiB."""
    total = 0
    for one in _family(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{one}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total
