"""The production topology's figures: through the load balancer with one and then two
instances, runtime proxy req/s against nginx proxying straight to the origin, and
product-route charges/s against pgbench running the same statements (issue #17).

    .venv/bin/python bench/topology_bench.py [--quick] [--rounds 3] [--duration 8]
        [--charges 800] [--concurrency 32] [--wallets 16] [--durable] [--dry-run]

Everything on 127.0.0.1, started by this script and stopped by it (by pid):

- the origin: nginx (1 worker) answering every path with a fixed 1,024-byte body, as in
  bench/proxy_bench.py; it serves both phases;
- the topology (``ops.cluster.topology.Cluster``) with 1 instance, measured, stopped, then
  again with 2: nginx terminating TLS in front of ``svc-server serve`` instances of
  ``SVCSRV_PROCESSES=2``, PostgreSQL, Redis, Hardhat. Its nginx gets one more server block
  (``Options.edge_extra``): the reference, a TLS listener of the same nginx proxying
  straight to the origin, so both targets pay the same TLS in the same workers;
- in the topology's database: app ``bench`` (runtime origin = the origin, pay_to set and
  allowlisted), product ``unlock-level`` (30,000 atomic) and ``--wallets`` authorizations
  of the chain's spender; a second database ``pgb`` on the same PostgreSQL gets the same
  world for pgbench.

Per phase: wrk over TLS through the edge to the router and to the reference, interleaved,
ratios per round; then the payment load through the edge (payment codes minted
beforehand) against ``pgbench -f bench/ledger/charge.sql``, interleaved, ratios per round.
The chain and webhook workers are not started: pgbench settles and sends nothing either,
and their own figures are bench/settlement_bench.py's and bench/webhook_bench.py's.

Unless --dry-run, writes the "Production topology" section of docs/BENCHMARKS.md and the
"Sizing" section of docs/deploy.md (those sections only, through bench/report.py).
"""

from __future__ import annotations

import argparse
import http.client
import os
import platform
import resource
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# This checkout's packages, not another one's editable install (bench/ itself is on
# sys.path when run as a script); the processes started here get the same through
# PYTHONPATH (``benchmark``).
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import ledger_bench  # noqa: E402
import proxy_bench  # noqa: E402
import topology_figures as figures  # noqa: E402
from report import write_section  # noqa: E402
from topology_figures import Payments, Phase  # noqa: E402

from ops.cluster.processes import Proc, Processes, free_port  # noqa: E402
from ops.cluster.topology import DOMAIN, Cluster, Options  # noqa: E402

DEPLOY = ROOT / "docs" / "deploy.md"
SLUG = "bench"
PRODUCT = "unlock-level"
PROCESSES = 2
HZ = os.sysconf("SC_CLK_TCK")
TIME_LIMIT = 900  # seconds for the whole run; SIGALRM then unwinds and stops everything
WRK = proxy_bench.WRK

# The reference: nginx straight to the origin, in the edge's own nginx (its http block gives
# the certificate and the access log), configured like the edge's proxy to the instances.
REFERENCE = """\
    upstream bench_origin {{
        server 127.0.0.1:{origin_port};
        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port} ssl;
        location / {{
            proxy_pass http://bench_origin;
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header Connection "";
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-Host $http_host;
            proxy_buffering off;
        }}
    }}
"""


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- CPU


def machine_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of all cores so far, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal
    return total - fields[3] - fields[4], total


class CpuWatch:
    """CPU of process families (a pid and its direct children) and of the machine over a
    window; ``stop`` gives seconds per family and the machine's busy cores."""

    def __init__(self, families: dict[str, list[Proc]]) -> None:
        self.pids = {label: [p for proc in procs for p in proxy_bench._family(proc.pid)]
                     for label, procs in families.items()}
        self.before = {label: sum(proxy_bench._family_split(pids))
                       for label, pids in self.pids.items()}
        self.machine0 = machine_ticks()
        self.start = time.monotonic()

    def stop(self) -> tuple[dict[str, float], float, float]:
        elapsed = time.monotonic() - self.start
        used = {label: (sum(proxy_bench._family_split(pids)) - self.before[label]) / HZ
                for label, pids in self.pids.items()}
        busy, total = machine_ticks()
        cores = os.cpu_count() or 1
        busy_cores = cores * (busy - self.machine0[0]) / max(total - self.machine0[1], 1)
        return used, busy_cores, elapsed


# --------------------------------------------------------------------------- the world


def seed(cluster: Cluster, database_url: str, origin: str, wallets: int) -> ledger_bench.World:
    """App ``bench`` serving the origin and selling ``unlock-level``, and ``wallets`` active
    authorizations of the topology's spender with huge budgets."""
    from payments import migrate
    from payments.db import make_engine, make_sessionmaker, transaction, utcnow
    from payments.ledger.models import Authorization, AuthorizationStatus, RelayStatus
    from payments.models import (
        AllowlistStatus,
        App,
        AppStatus,
        DomainRequestStatus,
        ListingStatus,
        PayToStatus,
        RuntimeStatus,
    )
    from payments.products import create_product
    from tests.ledger.flow import PAY_TO, wallet

    assert cluster.chain is not None
    params = cluster.chain.params
    engine = make_engine(database_url)
    try:
        migrate.upgrade(engine)
        now = utcnow()
        with transaction(make_sessionmaker(engine)) as session:
            app = App(name="Bench", slug=SLUG, pay_to=PAY_TO, status=AppStatus.ACTIVE,
                      pay_to_status=PayToStatus.APPROVED,
                      recipient_allowlist_status=AllowlistStatus.ALLOWED,
                      runtime_origin=origin, runtime_status=RuntimeStatus.ACTIVE,
                      runtime_domain_request_status=DomainRequestStatus.APPROVED,
                      portal_listing_status=ListingStatus.LISTED)
            session.add(app)
            session.flush()
            product = create_product(session, app, {"template": ledger_bench.PRODUCT_TEMPLATE})
            ids = []
            for i in range(wallets):
                authorization = Authorization(
                    owner_wallet=wallet(i).address.lower(), spender=params.spender.lower(),
                    token=params.token.lower(), chain_id=params.chain_id,
                    value_atomic=ledger_bench.HUGE_BUDGET, spent_atomic=0,
                    deadline=now + timedelta(days=1), nonce=0, signature="0x" + "11" * 65,
                    status=AuthorizationStatus.ACTIVE, relay_status=RelayStatus.RELAYED,
                    created_at=now)
                session.add(authorization)
                session.flush()
                ids.append(authorization.id)
            return ledger_bench.World(app.id, product.id, product.slug, product.price_atomic,
                                      PAY_TO, ids)
    finally:
        engine.dispose()


# --------------------------------------------------------------------------- proxy


@dataclass
class Target:
    name: str
    port: int
    host: str


def fetch(target: Target, context: ssl.SSLContext) -> tuple[int, bytes]:
    conn = http.client.HTTPSConnection("127.0.0.1", target.port, timeout=10, context=context)
    try:
        conn.request("GET", "/", headers={"Host": target.host})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def check_body(target: Target, context: ssl.SSLContext, when: str) -> None:
    status, body = fetch(target, context)
    if status != 200 or body != proxy_bench.BODY:
        raise RuntimeError(f"{target.name} answered {status} with {len(body)} bytes {when}, "
                           f"not the 1 KB body: {body[:200]!r}")


def wrk(target: Target, seconds: int, latency: bool = True) -> str:
    argv = [WRK, "-t1", f"-c{figures.CONNECTIONS}", f"-d{seconds}s",
            *(["--latency"] if latency else []), "-H", f"Host: {target.host}",
            f"https://127.0.0.1:{target.port}/"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 30,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr}{done.stdout}")
    return done.stdout


def measure(target: Target, seconds: int, families: dict[str, list[Proc]],
            context: ssl.SSLContext) -> proxy_bench.Sample:
    wrk(target, 2, latency=False)  # warm-up: connections, the routers' app caches
    watch = CpuWatch(families)
    child0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = wrk(target, seconds)
    child1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    used, busy, elapsed = watch.stop()
    sample = proxy_bench.parse_wrk(out)
    sample.cpu = {label: 100 * s / elapsed for label, s in used.items()}
    sample.cpu["wrk"] = 100 * ((child1.ru_utime + child1.ru_stime)
                               - (child0.ru_utime + child0.ru_stime)) / elapsed
    sample.cpu["machine"] = 100 * busy
    check_body(target, context, "after its load")
    return sample


# --------------------------------------------------------------------------- payments


async def _drive(cluster: Cluster, items: list[tuple[str, str, str]], concurrency: int,
                 spender: str) -> tuple[float, list[float]]:
    """``items`` (code, idempotency key, wallet) through the edge, on keep-alive TLS
    connections."""
    return await ledger_bench.drive_payments(f"{cluster.edge}/api/pay/{SLUG}/{PRODUCT}",
                                             cluster.host("api"), items, concurrency,
                                             spender, cluster.client_context())


def run_route(cluster: Cluster, pg: ledger_bench.Postgres, codes: list[tuple[str, int]],
              wallets: list[str], concurrency: int, tag: str) -> Payments:
    import uvloop

    assert cluster.chain is not None and cluster.nginx is not None
    url = cluster.database_url
    before = ledger_bench.row_counts(url)
    items = [(code, f"topo-{tag}-{i}", wallets[owner]) for i, (code, owner) in enumerate(codes)]
    instances = [i.proc for i in cluster.instances if i.proc is not None]
    watch = CpuWatch({"instances": instances, "edge": [cluster.nginx]})
    pg0 = ledger_bench.postgres_ticks(pg)
    self0 = resource.getrusage(resource.RUSAGE_SELF)
    elapsed, latencies = uvloop.run(_drive(cluster, items, concurrency,
                                           cluster.chain.params.spender))
    self1 = resource.getrusage(resource.RUSAGE_SELF)
    used, busy, _ = watch.stop()
    used["postgres"] = (ledger_bench.postgres_ticks(pg) - pg0) / HZ
    used["client"] = (self1.ru_utime + self1.ru_stime) - (self0.ru_utime + self0.ru_stime)
    ledger_bench.check_rows(url, before, len(codes), "product route")
    n = len(codes)
    run = ledger_bench.Run("route", n, elapsed, 1e3 * ledger_bench.percentile(latencies, 0.5),
                           1e3 * ledger_bench.percentile(latencies, 0.99),
                           {k: 1e3 * v / n for k, v in used.items()}, ledger_bench.DbStats(),
                           {})
    return Payments(run, busy)


def run_pgbench(pg: ledger_bench.Postgres, world: ledger_bench.World, concurrency: int,
                seconds: int, payload: str, response_body: str, tmp: Path) -> Payments:
    watch = CpuWatch({})
    run = ledger_bench.run_pgbench(pg, world, concurrency, seconds, payload, response_body,
                                   tmp, observe=False)
    _, busy, _ = watch.stop()
    return Payments(run, busy)


# --------------------------------------------------------------------------- a phase


@dataclass
class Settings:
    rounds: int
    duration: int
    charges: int
    concurrency: int
    wallets: int
    durable: bool


def run_phase(instances: int, origin: Proc, origin_port: int, settings: Settings,
              tmp: Path) -> Phase:
    from tests.ledger.flow import wallet

    ref_port = free_port()
    cluster = Cluster(Options(
        root=tmp / f"cluster-{instances}", edge_port=free_port(), instances=instances,
        processes=PROCESSES, durable=settings.durable, chain_worker=False,
        webhook_worker=False,
        edge_extra=REFERENCE.format(origin_port=origin_port, port=ref_port)))
    log(f"starting the topology with {instances} instance(s)")
    cluster.start()
    phase = Phase(instances, PROCESSES)
    try:
        assert cluster.nginx is not None
        pg = ledger_bench.Postgres(cluster.postgres.port, cluster.postgres.data,
                                   cluster.postgres.root)
        with ledger_bench.connect(pg.url()) as conn:
            conn.execute("CREATE DATABASE pgb")
        origin_url = f"http://127.0.0.1:{origin_port}"
        world = seed(cluster, cluster.database_url, origin_url, settings.wallets)
        pgb_world = seed(cluster, pg.url("pgb"), origin_url, settings.wallets)
        wallets = [str(wallet(i).address) for i in range(settings.wallets)]
        warm_n = max(200, settings.charges // 5)
        total = warm_n + settings.rounds * settings.charges
        log(f"minting {total:,} payment codes")
        codes = ledger_bench.issue_codes(cluster.database_url, world, total,
                                         cluster.url(f"portal.{DOMAIN}"))
        seeded = 100_000 if settings.charges > 1000 else 20_000
        ledger_bench.seed_pgbench_codes(pg.url("pgb"), pgb_world, 0, seeded)

        context = cluster.client_context()
        host = cluster.host(SLUG)
        lb, ref = Target("load balancer", cluster.options.edge_port, host), \
            Target("nginx -> origin", ref_port, host)
        for target in (lb, ref):
            check_body(target, context, "before its load")
        families: dict[str, list[Proc]] = {
            "edge": [cluster.nginx], "origin": [origin],
            "instances": [i.proc for i in cluster.instances if i.proc is not None]}
        for i in range(settings.rounds):
            order = (lb, ref) if i % 2 == 0 else (ref, lb)
            for target in order:
                sample = measure(target, settings.duration, families, context)
                (phase.lb if target is lb else phase.nginx).append(sample)
                log(f"{instances} instance(s), round {i + 1}, {target.name:15s} "
                    f"{sample.rps:9,.0f} req/s p99 {sample.p99_ms:6.2f} ms cpu "
                    f"{ {k: round(v) for k, v in sample.cpu.items()} } "
                    f"{sample.errors or 'no errors'}")

        taken = 0

        def take(n: int) -> list[tuple[str, int]]:
            nonlocal taken
            batch = codes[taken:taken + n]
            taken += n
            return batch

        warm_route = run_route(cluster, pg, take(warm_n), wallets, settings.concurrency, "warm")
        with ledger_bench.connect(cluster.database_url) as conn:
            payload = conn.execute("SELECT payload::text FROM webhook_events "
                                   "ORDER BY created_at DESC LIMIT 1").fetchone()[0]
            response_body = conn.execute("SELECT response_body::text FROM idempotency_records "
                                         "ORDER BY id DESC LIMIT 1").fetchone()[0]
        seconds = max(3, round(settings.charges / warm_route.run.rate))
        warm_pgb = run_pgbench(pg, pgb_world, settings.concurrency, 3, payload, response_body,
                               tmp)
        phase.warm = (warm_route, warm_pgb)
        phase.pgbench_seconds = seconds
        log(f"warm-up: route {warm_route.run.rate:,.0f}/s, pgbench {warm_pgb.run.rate:,.0f}/s; "
            f"pgbench -T {seconds} per round")
        consumed = warm_pgb.run.charges
        for i in range(settings.rounds):
            need = int(2 * max([warm_pgb.run.rate, *rates(phase.pgbench)]) * seconds)
            if seeded - consumed < need:
                ledger_bench.seed_pgbench_codes(pg.url("pgb"), pgb_world, seeded, need)
                seeded += need
            for side in (("route", "pgbench") if i % 2 == 0 else ("pgbench", "route")):
                if side == "route":
                    done = run_route(cluster, pg, take(settings.charges), wallets,
                                     settings.concurrency, f"r{i}")
                    phase.route.append(done)
                else:
                    done = run_pgbench(pg, pgb_world, settings.concurrency, seconds, payload,
                                       response_body, tmp)
                    consumed += done.run.charges
                    phase.pgbench.append(done)
                log(f"{instances} instance(s), round {i + 1}, {side:7s} "
                    f"{done.run.rate:7,.0f} charges/s p99 {done.run.p99_ms:6.1f} ms, "
                    f"{done.busy:.2f} cores busy, cpu ms/charge "
                    f"{ {k: round(v, 2) for k, v in done.run.cpu.items()} }")
        addresses = [f"127.0.0.1:{i.port}" for i in cluster.instances]
        phase.runtime_split, phase.pay_split = figures.split(cluster.access_log(), addresses)
    finally:
        cluster.stop()
    return phase


def rates(runs: list[Payments]) -> list[float]:
    return [p.run.rate for p in runs]


# --------------------------------------------------------------------------- the run


def machine() -> dict[str, str]:
    from importlib.metadata import version

    libs = ", ".join(f"{name} {version(name)}" for name in
                     ("uvicorn", "uvloop", "httptools", "starlette", "sqlalchemy", "psycopg",
                      "aiohttp"))
    postgres = ledger_bench.command_output([str(ledger_bench.PG_BIN / "postgres"),
                                            "--version"])
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "uname -m": platform.machine(),
        "nproc": ledger_bench.command_output(["nproc"]),
        "python": platform.python_version(),
        "nginx": ledger_bench.command_output([proxy_bench.NGINX, "-v"]).removeprefix(
            "nginx version: "),
        "wrk": ledger_bench.command_output([WRK, "-v"]).split(" Copyright")[0],
        "postgres": postgres,
        "pgbench": ledger_bench.command_output([str(ledger_bench.PG_BIN / "pgbench"),
                                                "--version"]),
        "libraries": libs,
        "load at start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def configuration(settings: Settings, phases: list[Phase]) -> dict[str, str]:
    reference = REFERENCE.format(origin_port="<origin>", port="<reference port>")
    seconds = ", ".join(f"{p.pgbench_seconds} s ({p.instances} instance"
                        f"{'' if p.instances == 1 else 's'})" for p in phases)
    pgbench = ledger_bench.PGBENCH_DOC.format(c=settings.concurrency)
    details = "\n".join("- " + item for item in [
        "the edge: `ops/cluster/topology.py` `NGINX_CONF` (2 workers, `worker_connections "
        "4096`, the access log in the `edge` format, `upstream svc { zone svc 64k; "
        "server <instance> max_fails=1 fail_timeout=5s; ... keepalive 64; }`, "
        "`proxy_buffering off`), "
        "and the reference server block in its `http` block (`Options.edge_extra`):"
        "\n\n  ```nginx\n" + "\n".join("  " + line for line in reference.rstrip().splitlines())
        + "\n  ```\n",
        "instances: `svc-server serve` with the topology's `SVCSRV_*` settings "
        "(`Cluster.env`: mode dev for the loopback origin, PostgreSQL, Redis, the JSON-RPC "
        f"chain, `SVCSRV_PROCESSES={PROCESSES}`, `TRUSTED_PROXIES=127.0.0.1/32`, chain and "
        "webhook workers off in the servers).",
        "origin: nginx, 1 worker, `return 200 \"<1,024 bytes>\"` (bench/proxy_bench.py's "
        "`UPSTREAM_HTTP`).",
        f"payments: client = this script, aiohttp on uvloop over TLS to the edge, "
        f"{settings.concurrency} concurrent requests; latency = send to full response, "
        f"charges/s = N / wall time of the batch. pgbench: `{pgbench}` (p50/p99 from its "
        f"per-transaction log), run for {seconds} per round.",
    ])
    postgres = ("PostgreSQL runs as `ops/cluster/services.py` starts it "
                + ("with fsync on (`--durable`)." if settings.durable else
                   "for tests (fsync, synchronous_commit and full_page_writes off, as "
                   "bench/ledger_bench.py): the figures measure CPU, which is what an "
                   "instance adds, not this machine's disk flushes; `--durable` keeps fsync."))
    workers = ("The chain and webhook workers are not started: pgbench settles and sends "
               "nothing either (their own figures: bench/settlement_bench.py, "
               "bench/webhook_bench.py).")
    return {"postgres": postgres, "workers": workers, "duration": str(settings.duration),
            "charges": f"{settings.charges:,} charges", "concurrency": str(settings.concurrency),
            "wallets": str(settings.wallets), "details": details,
            "reference": "The reference is nginx straight to the same origin: a second TLS "
                         "listener of the edge's own nginx (same workers, same certificate, "
                         "TLS 1.2/1.3, `keepalive 64` to the origin), so TLS costs both "
                         "targets the same."}


def benchmark(settings: Settings, dry_run: bool) -> int:
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    info = machine()
    log(f"load average at start: {info['load at start']}")
    tmp = Path(tempfile.mkdtemp(prefix="topology-bench-"))
    tmp.chmod(0o755)
    procs = Processes()
    try:
        origin_port = free_port()
        origin = proxy_bench.start_nginx(procs, "origin", tmp / "origin", proxy_bench.nginx_conf(
            tmp / "origin", proxy_bench.UPSTREAM_HTTP.format(
                port=origin_port, payload=proxy_bench.BODY.decode())))
        proxy_bench.wait_ready(origin, origin_port, "origin")
        phases = [run_phase(n, origin, origin_port, settings, tmp) for n in (1, 2)]
    finally:
        procs.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
    info["load at end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    section = figures.render(info, phases, configuration(settings, phases))
    sizing = figures.sizing(info, phases)
    print(section)
    print(sizing)
    if not dry_run:
        write_section(figures.HEADING, section)
        write_section(figures.SIZING_HEADING, sizing, DEPLOY)
        log("wrote docs/BENCHMARKS.md and docs/deploy.md")
    return 0


def _on_signal(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="a short smoke run: 1 round of 3 s, 400 charges")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=8, help="seconds of wrk per target")
    parser.add_argument("--charges", type=int, default=800, help="route charges per round")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--wallets", type=int, default=16,
                        help="authorizations the charges are spread over")
    parser.add_argument("--durable", action="store_true", help="PostgreSQL with fsync on")
    parser.add_argument("--dry-run", action="store_true", help="print only, write no docs")
    options = parser.parse_args()
    if options.quick:
        options.rounds, options.duration, options.charges = 1, 3, 400
    if not (1 <= options.rounds <= 10 and 1 <= options.duration <= 60
            and 100 <= options.charges <= 20_000 and 1 <= options.concurrency <= 200
            and 1 <= options.wallets <= 1000):
        parser.error("out of range: --rounds 1..10, --duration 1..60, --charges 100..20000, "
                     "--concurrency 1..200, --wallets 1..1000")
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGALRM, _on_signal)
    signal.alarm(TIME_LIMIT)
    settings = Settings(options.rounds, options.duration, options.charges,
                        options.concurrency, options.wallets, options.durable)
    return benchmark(settings, options.dry_run)


if __name__ == "__main__":
    raise SystemExit(main())
