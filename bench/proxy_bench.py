"""Runtime proxy vs nginx as a reverse proxy, in front of the same 1 KB upstream.

    .venv/bin/python bench/proxy_bench.py [--duration 10] [--rounds 3] [--processes N]
                                          [--dry-run]
    .venv/bin/python bench/proxy_bench.py --profile [--duration 10]

Everything on 127.0.0.1, started by this script (and stopped by it, by pid):

- upstream: nginx (1 worker) answering every path with a fixed 1,024-byte text body;
- Redis, which the router uses as production does (app cache invalidation);
- two pairs of targets, each an nginx proxy and the router with as many workers: 1 and 1,
  then N and N (default: the cores, nginx's ``worker_processes auto``):
  - nginx proxy: an ``upstream`` block (``keepalive 64``, HTTP/1.1, ``Connection ""``) in
    front of the upstream;
  - router: ``router.cli.serve`` (what ``svc-server serve`` runs) with ``SVCSRV_*``
    variables, ``SVCSRV_PROCESSES`` = 1 or N, one seeded app (``bench``) whose runtime
    origin is the upstream; requests carry ``Host: bench.apps.localhost:<port>``;
- reference: a Starlette app answering the same 1 KB itself, under the same uvicorn config
  (a ceiling for anything one uvicorn process serves; no upstream).

Each target is checked to answer 200 with exactly the 1 KB body, then loaded with
``wrk -t1 -c64 -d<duration>s --latency`` after a 2 s warm-up, interleaved for ``--rounds``
rounds. The medians of rounds and every round's raw figures go to stdout and, unless
--dry-run, to the "Runtime proxy vs nginx" section of docs/BENCHMARKS.md (replacing an
earlier run of this section only). The exit code is 0 when the N-against-N pair meets the
targets.

``--profile`` instead runs the one-process router under cProfile (enabled only while wrk
runs) and prints where its CPU time goes; nothing is written to docs/.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import http.client
import os
import platform
import pstats
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from report import write_section  # bench/ is on sys.path when run as a script

from ops.cluster.processes import Proc, Processes, free_port, listeners

if TYPE_CHECKING:
    from starlette.applications import Starlette


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.support (Redis, /proc/net/tcp), as the other benches
REPORT = ROOT / "docs" / "BENCHMARKS.md"
HEADING = "## Runtime proxy vs nginx (bench/proxy_bench.py)"
SLUG = "bench"
# 1,024 bytes, no characters that need escaping in an nginx string.
BODY = ("svc-proxy-bench-" * 64).encode()
assert len(BODY) == 1024
CONNECTIONS = 64
THREADS = 1
WARMUP = 2
TARGET_THROUGHPUT = 0.30  # router req/s >= 30% of nginx's
TARGET_P99 = 3.0  # router p99 <= 3x nginx's
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
WRK = shutil.which("wrk") or "wrk"


# --------------------------------------------------------------------------- launchers
# ``--serve router|reference`` runs in the child process: it is the "production" side.


def router_env(port: int, database: Path, redis_url: str, processes: int) -> dict[str, str]:
    """The ``SVCSRV_*`` variables the router is started with: `svc-server serve` as
    production runs it, with ``processes`` server processes."""
    base = f"localhost:{port}"
    return {
        "SVCSRV_MODE": "dev", "SVCSRV_DATABASE_URL": f"sqlite:///{database}",
        "SVCSRV_BIND_PORT": str(port), "SVCSRV_APPS_PORT": str(port),
        "SVCSRV_BASE_URL": f"http://api.{base}", "SVCSRV_PORTAL_URL": f"http://portal.{base}",
        "SVCSRV_CONSOLE_URL": f"http://console.{base}", "SVCSRV_DOCS_URL": f"http://docs.{base}",
        "SVCSRV_PROCESSES": str(processes), "SVCSRV_REDIS_URL": redis_url,
        # In production the payment workers run as `svc-ops chain run` and `svc-ops webhooks
        # run` processes (ARCHITECTURE.md, "Embedded defaults and scale-out"), not in the
        # processes serving runtimes; here their cycles (each every 1 s, in a thread) would be
        # background work nginx does not have. Several processes need a JSON-RPC chain; no
        # node is needed to proxy (nor started): without a relayer key nothing is signed.
        "SVCSRV_CHAIN_WORKERS": "false", "SVCSRV_WEBHOOK_WORKERS": "false",
        "SVCSRV_CHAIN_BACKEND": "json_rpc", "SVCSRV_CHAIN_RPC_URL": "http://127.0.0.1:9",
        "SVCSRV_SPENDER_ADDRESS": "0x" + "11" * 20,
    }


def _seed(database_url: str, origin: str) -> None:
    """One served app, as tests/factories.py ``add_app`` makes it."""
    from payments import migrate
    from payments.db import make_engine, make_sessionmaker, transaction
    from payments.models import App, DomainRequestStatus, ListingStatus, RuntimeStatus

    engine = make_engine(database_url)
    try:
        migrate.upgrade(engine)
        with transaction(make_sessionmaker(engine)) as session:
            session.add(App(
                name="Bench", slug=SLUG, runtime_origin=origin,
                runtime_status=RuntimeStatus.ACTIVE,
                runtime_domain_request_status=DomainRequestStatus.APPROVED,
                portal_listing_status=ListingStatus.LISTED,
            ))
    finally:
        engine.dispose()


def _reference_app() -> Starlette:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def answer(request: Request) -> PlainTextResponse:
        return PlainTextResponse(BODY)

    return Starlette(routes=[Route("/", answer)])


def serve(kind: str, upstream: str | None, profile: Path | None) -> None:
    """The router (`svc-server serve` with the ``SVCSRV_*`` variables this process was given)
    or the reference (the same uvicorn config around a Starlette app)."""
    import uvicorn

    from router.cli import serve as serve_router
    from router.cli import server_config
    from router.settings import load_settings

    settings = load_settings()
    if kind == "router":
        assert upstream is not None
        _seed(settings.database_url, upstream)
    if profile is not None:
        _profile_on_signals(profile)
    if kind == "router":
        serve_router(settings)
    else:
        uvicorn.Server(server_config(_reference_app(), settings, log_level="warning")).run()


def _profile_on_signals(profile: Path) -> None:
    # SIGUSR1 starts the profiler, SIGUSR2 stops it and writes the stats: only the
    # measured window is profiled, not imports, migrations or the warm-up.
    # CPU time, not wall time: on a shared 2-core box a descheduled syscall would otherwise
    # look like work.
    profiler = cProfile.Profile(time.process_time)
    signal.signal(signal.SIGUSR1, lambda *_: profiler.enable())

    def dump(*_: object) -> None:
        profiler.disable()
        profiler.dump_stats(profile)

    signal.signal(signal.SIGUSR2, dump)


# --------------------------------------------------------------------------- processes


def fetch(port: int, host: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/", headers={"Host": host})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def wait_ready(proc: Proc, port: int, host: str, timeout: float = 60) -> None:
    """Until the target answers 200 with exactly the 1 KB body (a 404 page is no benchmark)."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited ({proc.popen.returncode}):\n{proc.tail()}")
        try:
            status, body = fetch(port, host)
        except OSError as exc:
            last = exc
            time.sleep(0.1)
            continue
        if status == 200 and body == BODY:
            return
        raise RuntimeError(f"{proc.name} answered {status} with {len(body)} bytes, "
                           f"not the 1 KB body: {body[:200]!r}")
    raise RuntimeError(f"{proc.name} not ready after {timeout:.0f}s ({last}):\n{proc.tail()}")


def wait_listening(proc: Proc, port: int, count: int, timeout: float = 60) -> None:
    """Until ``count`` sockets listen on ``port`` (a router process listens only once its
    service has started, router/processes.py)."""
    deadline = time.monotonic() + timeout
    while True:
        if (listening := listeners(port)) >= count:
            return
        if time.monotonic() > deadline or proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name}: {listening} of {count} processes listening:\n"
                               f"{proc.tail()}")
        time.sleep(0.1)


# --------------------------------------------------------------------------- nginx

NGINX_COMMON = """\
worker_processes {workers};
{main}{user}pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections {connections}; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    # uvicorn never closes a keep-alive connection after N requests; nor does nginx here.
    keepalive_requests 1000000;
{http_extra}{body}}}
"""

UPSTREAM_HTTP = """\
    server {{
        listen 127.0.0.1:{port};
        default_type text/plain;
        location / {{ return 200 "{payload}"; }}
    }}
"""

PROXY_HTTP = """\
    upstream bench_upstream {{
        server 127.0.0.1:{upstream_port};
        keepalive 64;
        keepalive_requests 1000000;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://bench_upstream;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            # the forwarding headers the router also sends
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-Host $http_host;
        }}
    }}
"""


def nginx_user() -> str:
    # As root the master hands workers to `nobody`, whose group name differs by distribution;
    # keep the workers on the invoking user instead (a no-op warning when not root).
    if os.geteuid() != 0:
        return ""
    import grp
    import pwd

    return f"user {pwd.getpwuid(os.getuid()).pw_name} {grp.getgrgid(os.getgid()).gr_name};\n"


def nginx_conf(prefix: Path | str, http_body: str, workers: int | str = 1, *,
               user: str | None = None, main: str = "", connections: int | str = 4096,
               http_extra: str = "") -> str:
    """nginx.conf: ``main`` and ``http_extra`` are directives added to those contexts;
    ``user`` None: the invoking user's, as root."""
    return NGINX_COMMON.format(workers=workers, main=main,
                               user=nginx_user() if user is None else user, prefix=prefix,
                               connections=connections, http_extra=http_extra, body=http_body)


def start_nginx(procs: Processes, name: str, prefix: Path, conf_text: str) -> Proc:
    prefix.mkdir(parents=True, exist_ok=True)
    conf = prefix / "nginx.conf"
    conf.write_text(conf_text)
    argv = [NGINX, "-p", str(prefix), "-e", str(prefix / "error.log"), "-c", str(conf),
            "-g", "daemon off;"]
    return procs.start(name, argv, prefix / "stdout.log")


# --------------------------------------------------------------------------- wrk


@dataclass
class Sample:
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    bytes_per_request: float
    errors: str  # "" when wrk reported no socket errors and no non-2xx/3xx responses
    cpu: dict[str, float] = field(default_factory=dict)  # process -> % of one core
    kernel: dict[str, float] = field(default_factory=dict)  # the part of cpu spent in the kernel


_TIME = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}
_SIZE = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}


def _ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text)
    if not match:
        raise ValueError(f"unknown wrk time {text!r}")
    return float(match.group(1)) * _TIME[match.group(2)]


def parse_wrk(out: str) -> Sample:
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.M)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.M)
    total = re.search(r"(\d+) requests in [\d.]+\w+, ([\d.]+)([KMGT]?B) read", out)
    if not (rps and p50 and p99 and total):
        raise RuntimeError(f"could not parse wrk output:\n{out}")
    requests = int(total.group(1))
    read = float(total.group(2)) * _SIZE[total.group(3)]
    errors = []
    if sock := re.search(r"Socket errors: (.+)", out):
        errors.append("socket errors: " + sock.group(1).strip())
    if non2xx := re.search(r"Non-2xx or 3xx responses: (\d+)", out):
        errors.append(f"non-2xx/3xx: {non2xx.group(1)}")
    return Sample(rps=float(rps.group(1)), p50_ms=_ms(p50.group(1)), p99_ms=_ms(p99.group(1)),
                  requests=requests, bytes_per_request=read / max(requests, 1),
                  errors="; ".join(errors))


def wrk_argv(port: int, host: str, seconds: int, latency: bool = True) -> list[str]:
    argv = [WRK, f"-t{THREADS}", f"-c{CONNECTIONS}", f"-d{seconds}s"]
    if latency:
        argv.append("--latency")
    return [*argv, "-H", f"Host: {host}", f"http://127.0.0.1:{port}/"]


def run_wrk(port: int, host: str, seconds: int, latency: bool = True) -> str:
    done = subprocess.run(wrk_argv(port, host, seconds, latency), capture_output=True,
                          text=True, timeout=seconds + 30, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr}{done.stdout}")
    return done.stdout


def _cpu_split(pid: int) -> tuple[int, int]:
    """(user, kernel) clock ticks ``pid`` has used."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0, 0
    return int(fields[11]), int(fields[12])  # utime, stime


def _cpu_ticks(pid: int) -> int:
    return sum(_cpu_split(pid))


def _family_split(pids: list[int]) -> tuple[int, int]:
    splits = [_cpu_split(pid) for pid in pids]
    return sum(u for u, _ in splits), sum(k for _, k in splits)


def _family(pid: int) -> list[int]:
    """``pid`` and its direct children (an nginx master's workers)."""
    pids = [pid]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid:
            pids.append(int(stat.parent.name))
    return pids


@dataclass
class Target:
    key: str
    label: str
    proc: Proc
    port: int
    host: str
    watch: dict[str, Proc]  # CPU measured for these (label -> process)


def measure(target: Target, seconds: int) -> Sample:
    run_wrk(target.port, target.host, WARMUP, latency=False)
    families = {label: _family(proc.popen.pid) for label, proc in target.watch.items()}
    before = {label: _family_split(pids) for label, pids in families.items()}
    start = time.monotonic()
    out = run_wrk(target.port, target.host, seconds)
    elapsed = time.monotonic() - start
    sample = parse_wrk(out)
    hz = os.sysconf("SC_CLK_TCK")
    for label, pids in families.items():
        user, kernel = _family_split(pids)
        user, kernel = user - before[label][0], kernel - before[label][1]
        sample.cpu[label] = 100.0 * (user + kernel) / hz / elapsed
        sample.kernel[label] = 100.0 * kernel / hz / elapsed
    # Still the right body after the load (a crash page would be no benchmark either).
    status, body = fetch(target.port, target.host)
    if status != 200 or body != BODY:
        raise RuntimeError(f"{target.label} answered {status} / {len(body)} bytes after load")
    return sample


# --------------------------------------------------------------------------- the run


@dataclass
class Setup:
    tmp: Path
    processes: int  # of the whole-machine pair
    targets: list[Target]  # in the order of a round

    def __getitem__(self, key: str) -> Target:
        return next(t for t in self.targets if t.key == key)


@contextmanager
def setup(processes: int, profile: Path | None = None) -> Iterator[Setup]:
    """The upstream, Redis, and the targets: nginx (1 worker) and the router (1 process),
    the reference, then nginx (``processes`` workers) and the router (``processes``); with
    ``profile``, the one-process pair and the reference only."""
    from tests.support.services import redis_server

    procs = Processes()
    stack = contextlib.ExitStack()  # Redis, stopped after the routers that use it
    tmp = Path(tempfile.mkdtemp(prefix="proxy-bench-"))
    tmp.chmod(0o755)
    try:
        up_port = free_port()
        host_of = {}  # target key -> Host header (the router's names its own port)
        upstream = start_nginx(procs, "upstream nginx", tmp / "upstream", nginx_conf(
            tmp / "upstream", UPSTREAM_HTTP.format(port=up_port, payload=BODY.decode())))
        wait_ready(upstream, up_port, "upstream")
        # Started and stopped by its pid like the tests' own (tests/support/services.py).
        redis_url = stack.enter_context(redis_server())
        launcher = [sys.executable, str(Path(__file__).resolve()), "--serve"]
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("SVCSRV_")}
        base_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        started: list[tuple[str, str, Proc, int, dict[str, Proc]]] = []
        # Files are named by the pair's key, not its process count: with ``--processes 1``
        # (and in the profile's setup(1)) both pairs were "1" and shared one SQLite file,
        # where the second router's seed failed on the first's app (apps.slug).
        pairs = [("", 1)] if profile else [("", 1), ("-n", processes)]
        for suffix, count in pairs:
            n_port, r_port = free_port(), free_port()
            host_of[f"nginx{suffix}"] = host_of[f"router{suffix}"] = \
                f"{SLUG}.apps.localhost:{r_port}"
            proxy = start_nginx(procs, f"nginx proxy x{count}", tmp / f"proxy{suffix}",
                                nginx_conf(tmp / f"proxy{suffix}", PROXY_HTTP.format(
                                    port=n_port, upstream_port=up_port), workers=count))
            extra = ["--profile-out", str(profile)] if profile else []
            router = procs.start(
                f"router x{count}", [*launcher, "router", "--upstream",
                                     f"http://127.0.0.1:{up_port}", *extra],
                tmp / f"router{suffix}.log", cwd=str(ROOT),
                env={**base_env, **router_env(r_port, tmp / f"router{suffix}.db", redis_url,
                                              count)})
            started.append((f"nginx{suffix}", f"nginx proxy, {count} worker"
                            f"{'' if count == 1 else 's'}", proxy, n_port,
                            {"proxy": proxy, "upstream": upstream}))
            started.append((f"router{suffix}", f"router, {count} process"
                            f"{'' if count == 1 else 'es'}", router, r_port,
                            {"proxy": router, "upstream": upstream}))
            if not suffix:
                ref_port = free_port()
                host_of["reference"] = host_of["router"]
                reference = procs.start(
                    "reference", [*launcher, "reference"], tmp / "reference.log",
                    cwd=str(ROOT), env={**base_env, **router_env(
                        ref_port, tmp / "reference.db", redis_url, 1)})
                started.append(("reference", "reference (Starlette, no upstream)", reference,
                                ref_port, {"proxy": reference}))
        targets = []
        for key, label, proc, port, watch in started:
            wait_ready(proc, port, host_of[key])
            if key == "router-n":  # every process listening, not only the first one up
                wait_listening(proc, port, processes)
            targets.append(Target(key, label, proc, port, host_of[key], watch))
        yield Setup(tmp=tmp, processes=processes, targets=targets)
    finally:
        procs.stop_all()
        stack.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _on_sigterm(*_: object) -> None:
    raise SystemExit(143)


def command_output(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except OSError as exc:
        return f"unavailable ({exc})"
    return (done.stdout + done.stderr).strip().splitlines()[0] if (done.stdout + done.stderr) \
        else ""


def machine() -> dict[str, str]:
    from importlib.metadata import version

    libs = ", ".join(f"{name} {version(name)}" for name in
                     ("uvicorn", "uvloop", "httptools", "starlette", "aiohttp"))
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "uname -m": platform.machine(),
        "nproc": command_output(["nproc"]),
        "python": platform.python_version(),
        "nginx -v": command_output([NGINX, "-v"]).removeprefix("nginx version: "),
        "wrk": command_output([WRK, "-v"]).split(" Copyright")[0],
        "libraries": libs,
        "load average at start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def median(samples: list[Sample], attr: str) -> float:
    return float(statistics.median(float(getattr(s, attr)) for s in samples))


def round_ratio(samples: list[Sample], base: list[Sample], attr: str) -> float:
    """The median over rounds of ``samples``' figure divided by ``base``'s in the same round."""
    return float(statistics.median(float(getattr(s, attr)) / float(getattr(b, attr))
                                   for s, b in zip(samples, base, strict=True)))


def cpu_per_request(samples: list[Sample], kernel: bool = False) -> float:
    """Median CPU microseconds the server under test (not the upstream) spent per request
    (only in the kernel, with ``kernel``)."""
    return statistics.median(1e4 * (s.kernel if kernel else s.cpu)["proxy"] / s.rps
                             for s in samples)


def out_of_reach(nginx_rps: float, router: list[Sample], ref: list[Sample]) -> str:
    """What the throughput target asks of the router's CPU, against what uvicorn alone costs."""
    needed = TARGET_THROUGHPUT * nginx_rps
    budget = 1e6 / needed
    ref_cpu = cpu_per_request(ref)
    floor = ref_cpu + cpu_per_request(router, kernel=True) - cpu_per_request(ref, kernel=True)
    verdict = (
        f"Even with no Python work for the proxying at all, the reference's cost plus the "
        f"second socket's kernel time ({floor:.0f} us) is over that budget: with one uvicorn "
        "worker in Python the target is out of reach on this machine."
        if floor >= budget else
        f"The router would have to shed {cpu_per_request(router) - budget:.0f} us per request."
    )
    return (
        f"What the throughput target takes here: {needed:,.0f} req/s from one process on one "
        f"core, so at most {budget:.0f} us of CPU per request; the reference, which proxies "
        f"nothing, costs {ref_cpu:.0f} us under the same server. {verdict}"
    )


def where_time_goes(router: list[Sample], ref: list[Sample]) -> str:
    """The router's CPU per request against the reference's, user and kernel apart."""
    r_all, r_kernel = cpu_per_request(router), cpu_per_request(router, kernel=True)
    f_all, f_kernel = cpu_per_request(ref), cpu_per_request(ref, kernel=True)
    user = (r_all - r_kernel) - (f_all - f_kernel)
    user_note = (
        f"{user:.0f} us more user time (the cached route and gate, header policy both ways, "
        "the upstream client and parsing the origin's answer, beyond what uvicorn and "
        "Starlette spend on the reference's request)" if user >= 0 else
        f"{-user:.0f} us less user time: the router's own protocol (`router/fast_protocol."
        "py`) does all of its proxying in less than uvicorn's per-request work (scope, "
        "request cycle, task) and Starlette's routing cost the reference"
    )
    return (
        f"Where the router's time goes: {r_all:.0f} us of CPU per request "
        f"({r_all - r_kernel:.0f} us in Python and its C extensions, {r_kernel:.0f} us in "
        f"the kernel) against the reference's {f_all:.0f} us ({f_all - f_kernel:.0f} + "
        f"{f_kernel:.0f}): {user_note}, and {r_kernel - f_kernel:.0f} us more kernel "
        "time (the second socket: one more read and write per request, and the wake-up "
        "of the upstream each write causes). `--profile` shows the Python side; "
        "docs/decisions.md has what was measured and chosen."
    )


@dataclass
class Verdict:
    throughput: float
    p99: float

    @property
    def met(self) -> bool:
        return self.throughput >= TARGET_THROUGHPUT and self.p99 <= TARGET_P99

    def sentence(self) -> str:
        t_met = "met" if self.throughput >= TARGET_THROUGHPUT else "MISSED"
        p_met = "met" if self.p99 <= TARGET_P99 else "MISSED"
        return (f"throughput **{self.throughput:.0%}** of nginx's ({t_met}), p99 "
                f"**{self.p99:.2f}x** nginx's ({p_met})")


def verdict(results: dict[str, list[Sample]], router: str, nginx: str) -> Verdict:
    return Verdict(round_ratio(results[router], results[nginx], "rps"),
                   round_ratio(results[router], results[nginx], "p99_ms"))


def render(results: dict[str, list[Sample]], targets: Setup, info: dict[str, str],
           duration: int, rounds: int) -> tuple[str, bool]:
    n = targets.processes
    router, ref = results["router"], results["reference"]
    n_rps, r_rps = median(results["nginx"], "rps"), median(router, "rps")
    per_process = verdict(results, "router", "nginx")
    machine_wide = verdict(results, "router-n", "nginx-n")
    base_of = {"nginx": "nginx", "router": "nginx", "reference": "nginx",
               "nginx-n": "nginx-n", "router-n": "nginx-n"}
    order = " -> ".join(t.key for t in targets.targets)
    lines = [
        HEADING, "",
        f"Run {info['date']} on `{info['uname -m']}`, nproc {info['nproc']}, "
        f"Python {info['python']}, {info['nginx -v']}, {info['wrk']}; "
        f"{info['libraries']}. Load average at start: {info['load average at start']} "
        "(shared machine: compare the ratios, not the absolute figures).", "",
        f"Load: `wrk -t{THREADS} -c{CONNECTIONS} -d{duration}s --latency "
        f"-H 'Host: {SLUG}.apps.localhost:<router port>'` on loopback, after a {WARMUP} s "
        f"warm-up per target; targets interleaved ({order}) for {rounds} "
        f"round{'' if rounds == 1 else 's'}. Two pairs, each router against nginx with as "
        f"many workers: one process against one worker (what a Python process does on its "
        f"own), and {n} against {n}: nginx as a reverse proxy is deployed with "
        f"`worker_processes auto`, one per core ({info['nproc']} here), and the router with "
        f"`SVCSRV_PROCESSES` = the cores, so that pair is the two deployed on this machine. "
        "The table shows the median of rounds per column, except the ratios: those are the "
        "median of each round's ratio to the nginx of its pair (a round runs the targets back "
        "to back, so its ratios share the box's conditions; on this shared box they swing "
        "less than the absolute figures). Every target was checked to answer 200 with the "
        "exact 1,024-byte body before and after its load.", "",
        "| Target | Req/s | p50 | p99 | Req/s vs nginx | p99 vs nginx | CPU/req (server) "
        "| of which kernel |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    labels = {"nginx": "nginx reverse proxy (keepalive 64), 1 worker",
              "router": "router (`svc-server serve`), 1 process",
              "reference": "reference: Starlette answers 1 KB itself, 1 process",
              "nginx-n": f"nginx reverse proxy (keepalive 64), {n} workers",
              "router-n": f"router (`svc-server serve`), `SVCSRV_PROCESSES={n}`"}
    for target in targets.targets:
        rows, base = results[target.key], results[base_of[target.key]]
        rps, p50, p99 = median(rows, "rps"), median(rows, "p50_ms"), median(rows, "p99_ms")
        lines.append(f"| {labels[target.key]} | {rps:,.0f} | {p50:.2f} ms | {p99:.2f} ms | "
                     f"{round_ratio(rows, base, 'rps'):.2f} | "
                     f"{round_ratio(rows, base, 'p99_ms'):.2f} | {cpu_per_request(rows):.0f} us "
                     f"| {cpu_per_request(rows, kernel=True):.0f} us |")
    lines += [
        "",
        f"Targets: router >= {TARGET_THROUGHPUT:.0%} of nginx's throughput and router p99 <= "
        f"{TARGET_P99:g}x nginx's.", "",
        f"- As deployed on this machine ({n} router processes against {n} nginx workers): "
        f"{machine_wide.sentence()}.",
        f"- One router process against one nginx worker: {per_process.sentence()}. The "
        f"process makes {round_ratio(router, ref, 'rps'):.2f}x the reference's rate.", "",
        "CPU/req is the CPU time of the server process(es) under test divided by the "
        "requests answered (upstream excluded): it is what bounds throughput once wrk and "
        "the upstream take their share of the cores.", "",
        where_time_goes(router, ref), "",
        *([] if per_process.throughput >= TARGET_THROUGHPUT else [
            out_of_reach(n_rps, router, ref), ""]),
        *([] if per_process.p99 <= TARGET_P99 else [
            f"With {CONNECTIONS} connections always busy, the mean latency is {CONNECTIONS} / "
            f"req/s ({1e3 * CONNECTIONS / r_rps:.2f} ms for one router process), so its p99 "
            "moves with its throughput; garbage collection no longer adds pauses (the heap "
            "is frozen after startup, `router/heap.py`).", ""]),
        "Raw rounds (CPU = % of one core over the measured window, from /proc, summed over a "
        f"target's processes; the machine has {info['nproc']} cores shared by wrk, the proxy "
        "under test and the upstream):", "",
        "| Round | Target | Req/s | p50 | p99 | Requests | Bytes/req read | CPU proxy | "
        "CPU upstream | wrk errors |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for i in range(rounds):
        for target in targets.targets:
            s = results[target.key][i]
            upstream = f"{s.cpu['upstream']:.0f}%" if "upstream" in s.cpu else "-"
            lines.append(f"| {i + 1} | {target.key} | {s.rps:,.0f} | {s.p50_ms:.2f} ms | "
                         f"{s.p99_ms:.2f} ms | {s.requests:,} | {s.bytes_per_request:,.0f} | "
                         f"{s.cpu['proxy']:.0f}% | {upstream} | {s.errors or 'none'} |")
    upstream_conf = UPSTREAM_HTTP.format(port="<upstream port>", payload="<1,024 bytes>")
    proxy_conf = PROXY_HTTP.format(port="<nginx port>", upstream_port="<upstream port>")
    common = nginx_conf("<temp prefix>", "    ...\n", "<1 or N>", user="")
    env = {**router_env(0, Path("<SQLite file>"), "redis://127.0.0.1:<port>/0", 0),
           "SVCSRV_BIND_PORT": "<port>", "SVCSRV_APPS_PORT": "<port>",
           "SVCSRV_PROCESSES": "<1 or N>"}
    shown = [k for k in env if k[7:] not in ("BASE_URL", "PORTAL_URL", "CONSOLE_URL", "DOCS_URL")]
    env_text = " ".join(f"{k}={env[k]}" for k in shown)
    lines += [
        "", "Configuration:", "",
        "- upstream (1 worker) and the two nginx proxies: separate nginx processes "
        "(`nginx -p <prefix> -c <conf> -g 'daemon off;'`), each with", "",
        "```nginx", common.rstrip(), "```", "",
        "  upstream `http` body:", "", "```nginx", upstream_conf.rstrip(), "```", "",
        "  nginx proxy `http` body:", "", "```nginx", proxy_conf.rstrip(), "```", "",
        "- router: `router.cli.serve(load_settings())`, what `svc-server serve` runs, after "
        "migrations and one seeded app (slug `bench`, runtime origin = the upstream, runtime "
        f"active, domain approved), with `{env_text}` and base/portal/console/docs URLs "
        "`http://<name>.localhost:<port>`. That is: uvloop, the proxy's fast path on (each "
        "connection starts with our own HTTP/1.1 protocol, `router/fast_protocol.py`, which "
        "serves a bodyless request for a cached, open runtime itself, `router/fast_path.py`, "
        "`router/fast_exchange.py`, runs other bodyless requests through the ASGI app in a "
        "uvicorn request cycle, and hands a connection to uvicorn's httptools protocol at "
        "its first request with a body or an upgrade), the app cache invalidated through "
        "Redis, no access log, no server/date headers (the origin's are relayed), the payment "
        "workers off as in production, where `svc-ops chain run` and `svc-ops webhooks run` "
        "carry them, a JSON-RPC chain (no node: proxying never touches the chain, and "
        "without a relayer key nothing is signed), the heap frozen after startup "
        "(`router/heap.py`), the proxy's own HTTP/1.1 client (`router/upstream_client.py`, "
        "up to 512 idle keep-alive connections). With N processes each listens in the "
        "port's `SO_REUSEPORT` group (`router/processes.py`).",
        "- reference: a Starlette app with one route returning `PlainTextResponse(<1 KB>)`, "
        "same `server_config`, one process.",
    ]
    return "\n".join(lines) + "\n", machine_wide.met


def benchmark(duration: int, rounds: int, processes: int, dry_run: bool) -> int:
    info = machine()
    with setup(processes) as targets:
        results: dict[str, list[Sample]] = {t.key: [] for t in targets.targets}
        for i in range(rounds):
            for target in targets.targets:
                sample = measure(target, duration)
                results[target.key].append(sample)
                print(f"round {i + 1} {target.key:9s} {sample.rps:10,.0f} req/s  "
                      f"p50 {sample.p50_ms:7.2f} ms  p99 {sample.p99_ms:7.2f} ms  "
                      f"cpu {sample.cpu}  {sample.errors or 'no errors'}",
                      file=sys.stderr, flush=True)
    section, ok = render(results, targets, info, duration, rounds)
    print(section)
    if not dry_run:
        write_section(HEADING, section)
    return 0 if ok else 1


# Where a function's file lives -> the part of the stack it belongs to.
AREAS = (
    ("router/", "router (our code)"),
    ("aiohttp/", "aiohttp client"),
    ("yarl/", "yarl / multidict"),
    ("multidict/", "yarl / multidict"),
    ("uvicorn/", "uvicorn (httptools protocol)"),
    ("starlette/", "starlette"),
    ("asyncio/", "asyncio (stdlib)"),
    ("sqlalchemy/", "sqlalchemy"),
)


def area_of(filename: str, func: str) -> str:
    for marker, area in AREAS:
        if f"/{marker}" in filename:
            return area
    if filename == "~":
        if "uvloop" in func or "Handle" in func or "UVStream" in func or "Loop" in func:
            return "uvloop / builtins (C)"
        return "builtins (C)"
    return "other Python"


def profile(duration: int) -> int:
    out = Path(tempfile.mkdtemp(prefix="proxy-bench-profile-"))
    try:
        stats_file = out / "router.prof"
        with setup(1, profile=stats_file) as targets:
            target = targets["router"]
            run_wrk(target.port, target.host, WARMUP, latency=False)
            pid = target.proc.popen.pid
            before = _cpu_ticks(pid)
            os.kill(pid, signal.SIGUSR1)
            start = time.monotonic()
            sample = parse_wrk(run_wrk(target.port, target.host, duration))
            os.kill(pid, signal.SIGUSR2)
            elapsed = time.monotonic() - start
            cpu = (_cpu_ticks(pid) - before) / os.sysconf("SC_CLK_TCK")
            deadline = time.monotonic() + 30
            while not stats_file.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(0.5)
        print(f"router under cProfile: {sample.rps:,.0f} req/s, p99 {sample.p99_ms:.2f} ms, "
              f"{cpu:.1f} CPU s in {elapsed:.1f} s, {sample.errors or 'no errors'}")
        stats = pstats.Stats(str(stats_file))
        raw = stats.stats  # type: ignore[attr-defined]
        total = sum(tt for (_, _, tt, _, _) in raw.values())
        areas: dict[str, float] = {}
        for (filename, _, func), (_, _, tt, _, _) in raw.items():
            key = area_of(filename, func)
            areas[key] = areas.get(key, 0.0) + tt
        print(f"\nown time by area (profiled total {total:.2f} s of {cpu:.2f} CPU s):")
        for key, tt in sorted(areas.items(), key=lambda kv: -kv[1]):
            print(f"  {tt / total:6.1%}  {tt:7.2f} s  {key}")
        print("\nper request: "
              f"{1e6 * cpu / max(sample.requests, 1):.0f} us CPU under the profiler")
        print("\ntop functions by own time:")
        stats.sort_stats("tottime").print_stats(30)
        print("top functions by cumulative time:")
        stats.sort_stats("cumulative").print_stats(30)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=10, help="seconds of load per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dry-run", action="store_true", help="print only, write no docs")
    parser.add_argument("--profile", action="store_true",
                        help="profile the router under load instead (prints only)")
    parser.add_argument("--serve", choices=("router", "reference"), help=argparse.SUPPRESS)
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1,
                        help="router processes and nginx workers of the second pair "
                             "(default: the cores)")
    parser.add_argument("--upstream", help=argparse.SUPPRESS)
    parser.add_argument("--profile-out", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve:
        serve(options.serve, options.upstream, options.profile_out)
        return 0
    if not (1 <= options.duration <= 120 and 1 <= options.rounds <= 10
            and 1 <= options.processes <= 64):
        parser.error("--duration must be 1..120, --rounds 1..10 and --processes 1..64")
    signal.signal(signal.SIGTERM, _on_sigterm)
    if options.profile:
        return profile(options.duration)
    return benchmark(options.duration, options.rounds, options.processes, options.dry_run)


if __name__ == "__main__":
    raise SystemExit(main())
