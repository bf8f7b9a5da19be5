"""The production topology on loopback (docs/deploy.md): nginx terminating TLS in front
of two ``svc-server serve`` instances of two processes each, one PostgreSQL, one Redis,
``svc-ops chain run`` and ``svc-ops webhooks run`` as their own processes, a Hardhat node
as the JSON-RPC chain, and the demo app's origin.

Every process is the command an operator runs, configured only by ``SVCSRV_*`` variables;
:meth:`Cluster.env` is the environment they share. The fault tests (tests/deploy/) kill
and restart the parts through this class.
"""

from __future__ import annotations

import http.client
import os
import re
import secrets
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from ops.cluster.processes import (
    Awaited,
    Proc,
    Processes,
    free_port,
    listeners,
    wait_all,
    wait_until,
)
from ops.cluster.services import (
    HARDHAT_OWNER_KEY,
    HARDHAT_RELAYER_KEY,
    HardhatNode,
    Postgres,
    Redis,
    start_hardhat,
    start_nginx,
)
from ops.cluster.tls import EdgeTls, make_edge_tls
from payments.chain.allowed_recipients import set_allowed_recipient
from payments.chain.json_rpc import read_only
from router.dev import DEMO_PAY_TO
from router.settings import Settings, load_settings

BIN = Path(sys.executable).parent
DOMAIN = "localhost"
APPS_DOMAIN = f"apps.{DOMAIN}"


@dataclass
class Options:
    root: Path
    edge_port: int = 8443
    instances: int = 2
    processes: int = 2  # per instance
    durable: bool = True  # fsync on: a topology an operator tries; tests turn it off
    chain_worker: bool = True
    webhook_worker: bool = True
    # Extra SVCSRV_* settings for every process (tests shorten timers with these).
    settings: dict[str, str] = field(default_factory=dict)
    # More server blocks for the edge's `http` block, beside the topology's own: the
    # benchmark (bench/topology_bench.py) adds its reference proxy to the same nginx, so
    # both are served by the same workers with the same TLS.
    edge_extra: str = ""


@dataclass
class Instance:
    port: int
    proc: Proc | None = None


class Cluster:
    def __init__(self, options: Options) -> None:
        self.options = options
        self.root = options.root
        self.logs = self.root / "logs"
        self.procs = Processes()
        # PostgreSQL runs as its own user, who must reach its data directory: under our
        # root when every parent lets it through, else in a directory made for it.
        self._pg_outside = not _traversable(self.root)
        pg_root = (Path(tempfile.mkdtemp(prefix="svc-cluster-pg-")) if self._pg_outside
                   else self.root / "pg")
        self.postgres = Postgres(pg_root, durable=options.durable)
        self.redis = Redis(self.procs, self.logs)
        self.instances = [Instance(free_port()) for _ in range(options.instances)]
        self.secret_key = secrets.token_urlsafe(32)
        self.chain: HardhatNode | None = None
        self.tls: EdgeTls | None = None
        self.demo: Proc | None = None
        self.demo_port = free_port()
        self.chain_worker: Proc | None = None
        self.webhook_worker: Proc | None = None
        self.nginx: Proc | None = None

    # -- addresses ------------------------------------------------------------------------

    def url(self, host: str) -> str:
        return f"https://{host}:{self.options.edge_port}"

    @property
    def api_url(self) -> str:
        return self.url(f"api.{DOMAIN}")

    def runtime_url(self, slug: str) -> str:
        return self.url(f"{slug}.{APPS_DOMAIN}")

    @property
    def database_url(self) -> str:
        return self.postgres.url.rsplit("/", 1)[0] + "/svc"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of every worker and ``svc-ops`` process; the servers' is this
        without the relayer key (:meth:`server_env`)."""
        assert self.chain is not None
        params = self.chain.params
        base = {k: v for k, v in os.environ.items() if not k.startswith("SVCSRV_")}
        edge = self.options.edge_port
        values = {
            # dev mode: the demo origin is on loopback, which production refuses, and mail
            # is printed to the server's log instead of sent. Everything else is as
            # production runs it (docs/deploy.md says what differs).
            "MODE": "dev", "SECRET_KEY": self.secret_key,
            "DATABASE_URL": self.database_url, "REDIS_URL": self.redis.url,
            "BASE_URL": self.url(f"api.{DOMAIN}"), "PORTAL_URL": self.url(f"portal.{DOMAIN}"),
            "CONSOLE_URL": self.url(f"console.{DOMAIN}"), "DOCS_URL": self.url(f"docs.{DOMAIN}"),
            "APPS_DOMAIN": APPS_DOMAIN, "APPS_SCHEME": "https", "APPS_PORT": str(edge),
            "TRUSTED_PROXIES": "127.0.0.1/32", "PROCESSES": str(self.options.processes),
            "CHAIN_BACKEND": "json_rpc", "CHAIN_RPC_URL": self.chain.url,
            "CHAIN_ID": str(params.chain_id), "SPENDER_ADDRESS": params.spender,
            "USDC_ADDRESS": params.token, "USDC_NAME": params.token_name,
            "USDC_VERSION": params.token_version, "RELAYER_KEY": HARDHAT_RELAYER_KEY,
            "CHAIN_CONFIRMATIONS": "1", "CHAIN_WORKERS": "false", "WEBHOOK_WORKERS": "false",
            **self.options.settings, **extra,
        }
        return {**base, **{f"SVCSRV_{k}": v for k, v in values.items()}}

    def server_env(self, port: int) -> dict[str, str]:
        """A server's environment: no relayer key at all, as docs/deploy.md has it. Its
        chain reads need none (its /statusz checks them alone) and it signs nothing: the
        relayer shows through `svc-ops chain run`'s heartbeat."""
        env = self.env(BIND_PORT=str(port))
        del env["SVCSRV_RELAYER_KEY"]
        return env

    # -- start and stop -------------------------------------------------------------------

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        self.postgres.init()
        self.postgres.start()
        with psycopg.connect(self.postgres.url, autocommit=True) as conn:
            conn.execute("CREATE DATABASE svc")
        self.redis.start()
        self.chain = start_hardhat(self.procs, self.logs)
        # Every service host the servers route (the legacy launch host too), and
        # 127.0.0.1: Python clients cannot resolve *.localhost, so they connect to the
        # address and name the host in the Host header (nginx picks the server by it).
        self.tls = make_edge_tls(self.root / "tls",
                                 [*self.settings().service_hosts, "127.0.0.1"], APPS_DOMAIN)
        self.ops("migrate")
        self._start_demo()
        self.start_instances()
        if self.options.chain_worker:
            self.start_chain_worker()
        if self.options.webhook_worker:
            self.start_webhook_worker()
        self.nginx = start_nginx(self.procs, self.root / "nginx", self.nginx_conf(),
                                 self.options.edge_port)

    def stop(self) -> None:
        self.procs.stop_all()
        self.postgres.stop()
        if self._pg_outside:
            self.postgres.remove()

    def ops(self, *args: str) -> str:
        """Run ``svc-ops`` with the topology's environment; its output."""
        done = subprocess.run([str(BIN / "svc-ops"), *args], env=self.env(), text=True,
                              capture_output=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"svc-ops {' '.join(args)} failed:\n{done.stderr}{done.stdout}")
        return done.stdout

    def _start_demo(self) -> None:
        """The demo app (router.dev.seed_demo), its recipient allowlisted on the spender,
        and its origin as a process of its own."""
        assert self.chain is not None
        origin = f"http://127.0.0.1:{self.demo_port}"
        self.demo = self.procs.start("demo-origin", [
            sys.executable, "-m", "ops.cluster.demo", "--port", str(self.demo_port),
            "--origin", origin], self.logs / "demo-origin.log", env=self.env())
        wait_until(lambda: _get(self.demo_port, f"127.0.0.1:{self.demo_port}",
                                "/.well-known/svc.json")[0] == 200,
                   "the demo origin answering", self.demo)
        self.allow_recipient(DEMO_PAY_TO)

    def allow_recipient(self, address: str) -> None:
        """Put ``address`` on the spender's allowlist: the owner transaction of ``svc-ops
        allowlist add``, without recording an operator."""
        assert self.chain is not None
        chain = read_only(self.chain.url, self.chain.params, confirmations=1,
                          poll_interval=0.05)
        set_allowed_recipient(chain, HARDHAT_OWNER_KEY, address, True)

    def start_instances(self) -> None:
        """Every instance at once, then wait until all serve: each spends seconds importing
        and binding, which one after another added up. If one exits before it serves, the
        error names it and the others are stopped here (:meth:`start` stops the rest)."""
        launched: list[Proc] = []
        try:
            for index in range(len(self.instances)):
                launched.append(self._launch_instance(index))
            wait_all([self._serving(index) for index in range(len(self.instances))])
        except BaseException:
            for instance, proc in zip(self.instances, launched, strict=False):
                self.stop_process(proc)
                instance.proc = None
            raise

    def start_instance(self, index: int) -> Proc:
        """One instance (again: the fault tests restart the one they killed)."""
        proc = self._launch_instance(index)
        wait_all([self._serving(index)])
        return proc

    def _launch_instance(self, index: int) -> Proc:
        instance = self.instances[index]
        name = f"server-{index + 1}"
        instance.proc = self.procs.start(name, [str(BIN / "svc-server"), "serve"],
                                         self.logs / f"{name}.log",
                                         env=self._named(name, self.server_env(instance.port)))
        return instance.proc

    def _serving(self, index: int) -> Awaited:
        """An instance serves once each of its processes listens and /healthz answers."""
        instance = self.instances[index]
        return Awaited(f"server-{index + 1} serving",
                       lambda: listeners(instance.port) >= self.options.processes
                       and _get(instance.port, f"api.{DOMAIN}:{self.options.edge_port}",
                                "/healthz")[0] == 200, instance.proc)

    def kill_instance(self, index: int) -> None:
        proc = self.instances[index].proc
        if proc is not None:
            self.kill(proc)
            self.instances[index].proc = None

    def freeze_instance(self, index: int) -> None:
        """Stop an instance where it stands (SIGSTOP): the requests it holds, and those the
        edge sends it meanwhile, stay in flight until it is killed."""
        proc = self.instances[index].proc
        if proc is not None:
            proc.freeze()

    def kill(self, proc: Proc) -> None:
        """kill -9 of a worker (or any process started here), as a crash takes it."""
        proc.kill()
        self.procs.forget(proc)

    def stop_process(self, proc: Proc) -> None:
        """SIGTERM, as an operator stops it: it finishes or gives back what it holds."""
        proc.stop()
        self.procs.forget(proc)

    def start_chain_worker(self, name: str = "chain-worker") -> Proc:
        """``svc-ops chain run``; another ``name`` starts one more beside it (the fault tests
        run two by mistake), with its own log."""
        proc = self.procs.start(name, [str(BIN / "svc-ops"), "chain", "run"],
                                self.logs / f"{name}.log", env=self._named(name, self.env()))
        if name == "chain-worker":
            self.chain_worker = proc
        return proc

    def start_webhook_worker(self) -> Proc:
        self.webhook_worker = self.procs.start(
            "webhook-worker", [str(BIN / "svc-ops"), "webhooks", "run"],
            self.logs / "webhook-worker.log", env=self._named("webhook-worker", self.env()))
        return self.webhook_worker

    @staticmethod
    def _named(name: str, env: dict[str, str]) -> dict[str, str]:
        # libpq's application name: pg_stat_activity says which process holds which
        # connection (and the fault tests see when a restarted worker is connected).
        return {**env, "PGAPPNAME": name}

    def settings(self) -> Settings:
        """The settings every process reads from :meth:`env`."""
        return load_settings(self.env(), role="operator")

    def nginx_conf(self) -> str:
        assert self.tls is not None
        return edge_conf(self.root / "nginx", [i.port for i in self.instances],
                         self.options.edge_port, self.tls, edge_names(self.settings()),
                         self.options.edge_extra)

    def client_context(self) -> ssl.SSLContext:
        assert self.tls is not None
        return ssl.create_default_context(cafile=str(self.tls.ca))

    @property
    def edge(self) -> str:
        """The edge by address, for clients that cannot resolve ``*.localhost``."""
        return f"https://127.0.0.1:{self.options.edge_port}"

    def host(self, name: str) -> str:
        """The Host header for ``name`` (``api``, ``portal``, an app slug...)."""
        suffix = DOMAIN if name in ("api", "portal", "console", "docs") else APPS_DOMAIN
        return f"{name}.{suffix}:{self.options.edge_port}"

    def access_log(self) -> list[str]:
        try:
            return (self.root / "nginx" / "access.log").read_text().splitlines()
        except OSError:
            return []


def edge_names(settings: Settings) -> list[str]:
    """The names the edge serves: every host ``router.hosts.HostTable`` routes (the service
    hosts, the legacy launch host when set) and the runtimes under the apps domain."""
    return [*settings.service_hosts, runtime_server_name(settings.apps_domain)]


def runtime_server_name(apps_domain: str) -> str:
    """nginx's ``server_name`` for ``<slug>.{apps_domain}``: exactly one label, as the
    router routes. A wildcard (``*.apps.example``) would also take ``a.b.apps.example``
    and pass it on, for the router to answer as no host of ours; this leaves it to the
    default server's 421. nginx matches it against ``$host``, lower-cased."""
    return rf"~^[a-z0-9-]+\.{re.escape(apps_domain.lower())}$"


def edge_conf(prefix: Path, upstreams: Sequence[int], edge_port: int, tls: EdgeTls,
              names: Sequence[str], extra: str = "") -> str:
    """The edge's nginx.conf: ``names`` served on ``edge_port``, proxied to the servers on
    loopback ``upstreams``; ``extra`` server blocks beside them."""
    servers = "\n".join(f"        server 127.0.0.1:{port} max_fails=1 fail_timeout=5s;"
                        for port in upstreams)
    return NGINX_CONF.format(user=_nginx_user(), prefix=prefix, servers=servers,
                             edge_port=edge_port, cert=tls.cert, key=tls.key,
                             hosts=" ".join(names), extra=extra)


def _get(port: int, host: str, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path, headers={"Host": host})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _traversable(path: Path) -> bool:
    """Whether any user can reach ``path``'s children (o+x on it and every parent)."""
    path = path.resolve()
    for part in (path, *path.parents):
        if part.exists() and not part.stat().st_mode & 0o001:
            return False
    return True


def _nginx_user() -> str:
    # As root the master hands workers to `nobody`, whose group differs by distribution;
    # keep them on the invoking user (they read the key file we wrote 0600).
    if os.geteuid() != 0:
        return ""
    import grp
    import pwd

    return f"user {pwd.getpwuid(os.getuid()).pw_name} {grp.getgrgid(os.getgid()).gr_name};"


# The edge: TLS for every host, one upstream of all instances. nginx is the first hop, so
# it replaces X-Forwarded-For with the peer it saw and clears every other forwarding
# header; the servers believe it because SVCSRV_TRUSTED_PROXIES names loopback. A
# connection refused by a dead instance is retried on the next one (`proxy_next_upstream
# error`): nothing was sent yet, so this is safe for a POST too; a request that was sent
# and then lost its instance is not retried (`non_idempotent` is not set): the client sees
# a 502 and retries with its idempotency key.
NGINX_CONF = """\
worker_processes 2;
{user}
pid {prefix}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
    # Which instance answered each request: the fault tests read it. The host served and
    # passed on ($http_host would be a Host header the request line overrode), and the
    # target as sent, less its query: query strings carry short-lived codes
    # (/svc-auth-return?code=). Not $uri, which is decoded and normalized: a %20 in it
    # would split the line's fields, and another path than the one sent be logged. The
    # same as deploy/nginx/svc.conf.template's.
    map $request_uri $request_path {{ "~^(?<path>[^?]*)" $path; }}
    log_format edge '$status $request_method $host:$server_port$request_path $upstream_addr '
                    '$upstream_status $request_time';
    access_log {prefix}/access.log edge;
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    map $http_upgrade $connection_upgrade {{ default upgrade; '' ''; }}
    upstream svc {{
        # Shared by the workers: an instance one worker found dead is skipped by the
        # other too, instead of each paying a failed connect of its own (CI, 2026-11-27).
        zone svc 64k;
{servers}
        keepalive 64;
        # Under the servers' SVCSRV_KEEP_ALIVE_TIMEOUT (5 s): nginx drops an idle
        # connection before a server can close it under a request nginx just sent (a POST
        # is not retried: 502, and the instance counted as failed).
        keepalive_timeout 4s;
    }}
    # One certificate for every host, set here so that every server block inherits it.
    ssl_certificate {cert};
    ssl_certificate_key {key};
    ssl_protocols TLSv1.2 TLSv1.3;
    # Any other name, or none: 421, never passed on. The servers believe X-Forwarded-Host
    # from us; a default server that proxied would vouch for whatever Host a client wrote.
    server {{
        listen 127.0.0.1:{edge_port} ssl default_server;
        return 421;
    }}
    server {{
        listen 127.0.0.1:{edge_port} ssl;
        server_name {hosts};
        client_max_body_size 64m;
        location / {{
            proxy_pass http://svc;
            proxy_http_version 1.1;
            # The name served ($host: the request line's if it has one, RFC 9112 3.2.2,
            # else the Host header's) and our port, never the Host header as written:
            # after `GET https://demo.apps.localhost/`, `Host: evil.example` is not ours.
            proxy_set_header Host $host:$server_port;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-Host $host:$server_port;
            # Every other forwarding claim the router knows (router/headers.py,
            # FOREIGN_FORWARDING), cleared: no client's own passes the edge.
            proxy_set_header Forwarded "";
            proxy_set_header X-Forwarded-Ssl "";
            proxy_set_header X-Forwarded-Scheme "";
            proxy_set_header X-Forwarded-Protocol "";
            proxy_set_header Front-End-Https "";
            proxy_set_header X-Url-Scheme "";
            proxy_set_header X-Forwarded-Port "";
            proxy_set_header X-Forwarded-Server "";
            proxy_set_header X-Forwarded-Prefix "";
            proxy_set_header X-Forwarded-Path "";
            proxy_set_header X-Original-URL "";
            proxy_set_header X-Rewrite-URL "";
            proxy_set_header X-Original-URI "";
            proxy_set_header X-Forwarded-Uri "";
            proxy_set_header X-Forwarded "";
            proxy_set_header Forwarded-For "";
            proxy_set_header X-Original-Forwarded-For "";
            proxy_set_header X-Real-IP "";
            proxy_set_header Client-IP "";
            proxy_set_header X-Client-IP "";
            proxy_set_header True-Client-IP "";
            proxy_set_header CF-Connecting-IP "";
            proxy_set_header Fastly-Client-IP "";
            proxy_set_header X-Cluster-Client-IP "";
            proxy_next_upstream error timeout;
            proxy_connect_timeout 2s;
            proxy_read_timeout 60s;
            proxy_buffering off;
            # An answer's instructions to nginx (an internal redirect, buffering, a rate):
            # the router drops them from runtimes' answers, and nginx ignores them too.
            proxy_ignore_headers X-Accel-Redirect X-Accel-Expires X-Accel-Limit-Rate
                                 X-Accel-Buffering X-Accel-Charset;
        }}
    }}
{extra}}}
"""
