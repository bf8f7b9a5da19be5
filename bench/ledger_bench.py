"""Charges per second through the product route vs pgbench doing the same SQL, on PostgreSQL.

    .venv/bin/python bench/ledger_bench.py [--charges 3000] [--concurrency 32] [--rounds 3]
                                           [--wallets 1] [--profile-charges 1000] [--dry-run]
                                           [--pgbench-seconds N]

Everything runs on 127.0.0.1 and is started (and stopped, by pid) by this script:

- PostgreSQL 15: a throwaway cluster with the options of ``tests/support/services.py``
  ``postgres_server()`` (fsync, synchronous_commit and full_page_writes off) plus
  ``pg_stat_statements`` preloaded, so both sides' round trips are counted by the server.
  Two databases, each migrated with ``payments.migrate.upgrade``: ``route`` and ``pgb``.
  Both get the same world: one app (``pay_to`` set, recipient allowlisted), one fixed-price
  product (``unlock-level``, 30,000 atomic), and ``--wallets`` authorizations with a huge
  budget (9e18 atomic).
- product route: ``svc-server serve`` in its own process with ``SVCSRV_*`` settings (mode
  dev, the ``route`` database). ``payments.ledger.codes.issue`` pre-issues one payment code
  per charge (bound to the product, authorizations round-robin), so the measured loop is
  only ``POST /api/pay/bench/unlock-level``. This process drives it with ``--concurrency``
  concurrent requests (aiohttp on uvloop, keep-alive), each with its own code and
  idempotency key; every answer must be 201 and the database must hold exactly N more
  charges, deliveries, events, attempts, idempotency records and consumed codes afterwards.
- pgbench: ``bench/ledger/charge.sql`` in ``-M prepared`` mode, the same statements the
  route sends in one transaction per charge, against ``pgb``, with ``-c <concurrency>
  -j 2`` for as long as the route's warm-up predicts N charges take (at least 5 s; or
  ``--pgbench-seconds``, which a smoke run sets to 1), after a warm-up of 3 s (at most
  that run's length). Its
  event payload and response body are the route's own (copied after the warm-up) and it
  must leave exactly as many new rows as transactions it reports.

After a warm-up of both, route and pgbench run interleaved for ``--rounds`` rounds (the
order alternates); the medians and the raw rounds go to stdout and, unless --dry-run, to
the "Product route vs pgbench" section of docs/BENCHMARKS.md (that section only).
``--profile-charges`` then drives that many charges at a fresh router under cProfile (every
thread, CPU time) and prints where the router's time goes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import platform
import pstats
import re
import resource
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from report import write_section  # bench/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REPORT = ROOT / "docs" / "BENCHMARKS.md"
HEADING = "## Product route vs pgbench (bench/ledger_bench.py)"
SCRIPT = ROOT / "bench" / "ledger" / "charge.sql"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
APP_SLUG = "bench"
PRODUCT_TEMPLATE = "unlock_level"  # slug unlock-level, 30,000 atomic, optimistic
HUGE_BUDGET = 9 * 10**18
TARGET_RATIO = 0.30
TIME_LIMIT = 570  # seconds for the whole run; SIGALRM then unwinds and stops everything
PG_OPTIONS = ("-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
              "-c max_connections=400 -c shared_preload_libraries=pg_stat_statements "
              "-c pg_stat_statements.track=top")


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    from tests.support.services import free_port as _free_port

    return _free_port()


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@dataclass
class Postgres:
    port: int
    data: Path
    root: Path

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    @property
    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])


@contextmanager
def postgres_server() -> Iterator[Postgres]:
    """``tests/support/services.postgres_server`` plus pg_stat_statements."""
    root = Path(tempfile.mkdtemp(prefix="ledger-bench-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    root.chmod(0o755)
    port = free_port()
    subprocess.run(_as_postgres([str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust",
                                 "-U", "postgres", "--no-sync", "-E", "UTF8"]),
                   check=True, stdout=subprocess.DEVNULL, timeout=120)
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 {PG_OPTIONS}"
    subprocess.run(_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", options,
                                 "-l", str(root / "log"), "-w", "start"]),
                   check=True, stdout=subprocess.DEVNULL, timeout=120)
    server = Postgres(port, data, root)
    try:
        yield server
    finally:
        pid_file = data / "postmaster.pid"
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)  # "fast" stop
            for _ in range(200):
                if not pid_file.exists():
                    break
                time.sleep(0.05)
        shutil.rmtree(root, ignore_errors=True)


def _ticks(pid: int, children: bool = False, system_only: bool = False) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    if system_only:  # stime (+ cstime)
        return int(fields[12]) + (int(fields[14]) if children else 0)
    own = int(fields[11]) + int(fields[12])  # utime + stime
    return own + (int(fields[13]) + int(fields[14]) if children else 0)  # + cutime, cstime


def _sys_ticks(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[12])
    except OSError:
        return 0


def _switches(pid: int) -> dict[int, int]:
    """Context switches (voluntary + involuntary) of each live thread of ``pid`` so far."""
    found = {}
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            found[int(status.parent.name)] = sum(
                int(line.split()[1]) for line in status.read_text().splitlines()
                if "ctxt_switches:" in line)
        except (OSError, ValueError, IndexError):
            continue
    return found


def switches_since(pid: int, before: dict[int, int]) -> int:
    """Per thread, so that idle worker threads exiting (anyio retires them) subtract nothing;
    a thread that exits during the run loses its count (an undercount, never negative)."""
    return sum(n - before.get(tid, 0) for tid, n in _switches(pid).items())


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def postgres_ticks(pg: Postgres, system_only: bool = False) -> int:
    """All CPU the cluster used so far: postmaster, live backends, and reaped ones."""
    pid = pg.postmaster_pid
    return (_ticks(pid, children=True, system_only=system_only)
            + sum(_ticks(c, system_only=system_only) for c in _children(pid)))


HZ = os.sysconf("SC_CLK_TCK")


@dataclass
class Router:
    popen: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def host(self) -> str:
        return f"api.localhost:{self.port}"

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)  # its own session
                self.popen.wait(timeout=5)


def router_env(database_url: str, port: int, webhook_workers: bool = False) -> dict[str, str]:
    # SVCSRV_DB_WORKERS passes through, to compare settings; every other SVCSRV_ is fixed.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SVCSRV_") or k == "SVCSRV_DB_WORKERS"}
    base = f"localhost:{port}"
    env.update({
        "SVCSRV_MODE": "dev", "SVCSRV_DATABASE_URL": database_url,
        "SVCSRV_BIND_HOST": "127.0.0.1", "SVCSRV_BIND_PORT": str(port),
        "SVCSRV_APPS_PORT": str(port), "SVCSRV_BASE_URL": f"http://api.{base}",
        "SVCSRV_PORTAL_URL": f"http://portal.{base}", "SVCSRV_CONSOLE_URL": f"http://console.{base}",
        "SVCSRV_DOCS_URL": f"http://docs.{base}",
        # Settlement/relay workers and the webhook dispatcher off in the server: production
        # on PostgreSQL runs them as their own processes (`svc-ops`), and pgbench settles
        # and sends nothing either.
        "SVCSRV_CHAIN_WORKERS": "0",
        "SVCSRV_WEBHOOK_WORKERS": "1" if webhook_workers else "0",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", ""))
                                      if p),
    })
    return env


ROUTER_ENV_DOC = ("SVCSRV_MODE=dev SVCSRV_DATABASE_URL=postgresql://postgres@127.0.0.1:<pg>/route "
                  "SVCSRV_BIND_HOST=127.0.0.1 SVCSRV_BIND_PORT=<port> SVCSRV_APPS_PORT=<port> "
                  "SVCSRV_BASE_URL=http://api.localhost:<port> "
                  "SVCSRV_PORTAL_URL=http://portal.localhost:<port> "
                  "SVCSRV_CONSOLE_URL=http://console.localhost:<port> "
                  "SVCSRV_DOCS_URL=http://docs.localhost:<port> SVCSRV_CHAIN_WORKERS=0 "
                  "SVCSRV_WEBHOOK_WORKERS=0")


def start_router(database_url: str, tmp: Path, profile_out: Path | None = None, *,
                 webhook_workers: bool = False) -> Router:
    port = free_port()
    log = tmp / ("router-profiled.log" if profile_out else "router.log")
    if profile_out is None:
        argv = [str(Path(sys.executable).with_name("svc-server")), "serve"]
    else:
        argv = [sys.executable, str(Path(__file__).resolve()), "--serve-profiled",
                str(profile_out)]
    with log.open("wb") as handle:
        popen = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True,
                                 env=router_env(database_url, port, webhook_workers),
                                 cwd=str(ROOT))
    router = Router(popen, port, log)
    deadline = time.monotonic() + 90
    import http.client
    while True:
        if popen.poll() is not None:
            raise RuntimeError(f"the router exited ({popen.returncode}):\n{router.tail()}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/healthz", headers={"Host": router.host})
            response = conn.getresponse()
            body = response.read()
            conn.close()
            if response.status == 200:
                return router
            raise RuntimeError(f"/healthz answered {response.status}: {body[:200]!r}")
        except OSError:
            if time.monotonic() > deadline:
                router.stop()
                raise RuntimeError(f"the router did not start:\n{router.tail()}") from None
            time.sleep(0.2)


# --------------------------------------------------------------------------- the world


@dataclass
class World:
    app_id: str
    product_id: str
    product_slug: str
    amount: int
    pay_to: str
    authorization_ids: list[str]


def seed_world(database_url: str, wallets: int) -> World:
    """Migrate and seed: app, product, ``wallets`` active authorizations with huge budgets."""
    from payments import migrate
    from payments.chain.params import in_process_params
    from payments.db import make_engine, make_sessionmaker, transaction, utcnow
    from payments.ledger.models import Authorization, AuthorizationStatus, RelayStatus
    from payments.models import AllowlistStatus, App, AppStatus, PayToStatus
    from payments.products import create_product
    from tests.ledger.flow import PAY_TO, wallet

    params = in_process_params()
    engine = make_engine(database_url)
    try:
        migrate.upgrade(engine)
        now = utcnow()
        with transaction(make_sessionmaker(engine)) as session:
            app = App(name="Bench", slug=APP_SLUG, pay_to=PAY_TO,
                      pay_to_status=PayToStatus.APPROVED, status=AppStatus.ACTIVE,
                      recipient_allowlist_status=AllowlistStatus.ALLOWED)
            session.add(app)
            session.flush()
            product = create_product(session, app, {"template": PRODUCT_TEMPLATE})
            ids = []
            for i in range(wallets):
                authorization = Authorization(
                    owner_wallet=wallet(i).address.lower(), spender=params.spender_lower,
                    token=params.token.lower(), chain_id=params.chain_id,
                    value_atomic=HUGE_BUDGET, spent_atomic=0, deadline=now + timedelta(days=1),
                    nonce=0, signature="0x" + "11" * 65, status=AuthorizationStatus.ACTIVE,
                    relay_status=RelayStatus.RELAYED, created_at=now)
                session.add(authorization)
                session.flush()
                ids.append(authorization.id)
            return World(app.id, product.id, product.slug, product.price_atomic, PAY_TO, ids)
    finally:
        engine.dispose()


def issue_codes(database_url: str, world: World, count: int,
                audience: str) -> list[tuple[str, int]]:
    """``count`` product-bound payment codes, as the payment-code exchange issues them,
    each with the index of its authorization (the wallet that must pay with it)."""
    from payments.db import make_engine, make_sessionmaker, transaction, utcnow
    from payments.ledger import codes
    from payments.ledger.models import CodeKind

    engine = make_engine(database_url)
    try:
        now = utcnow()
        issued = []
        with transaction(make_sessionmaker(engine)) as session:
            for i in range(count):
                index = i % len(world.authorization_ids)
                issued.append((codes.issue(
                    session, CodeKind.PAYMENT, ttl=timedelta(hours=2), now=now,
                    authorization_id=world.authorization_ids[index], app_id=world.app_id,
                    audience=audience, product_id=world.product_id,
                    developer_user_id="user-1").code, index))
        return issued
    finally:
        engine.dispose()


def connect(url: str) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True)


def seed_pgbench_codes(url: str, world: World, start: int, count: int) -> None:
    """Codes ``start+1 .. start+count``: code_hash = sha256('pgb-code-<n>'), as charge.sql."""
    with connect(url) as conn:
        conn.execute("CREATE SEQUENCE IF NOT EXISTS bench_code_seq")
        conn.execute(
            "INSERT INTO auth_codes (kind, code_hash, authorization_id, app_id, audience, "
            "return_url, product_id, developer_user_id, created_at, expires_at) "
            "SELECT 'payment', encode(sha256(convert_to('pgb-code-' || n::text, 'UTF8')), "
            "'hex'), (%(auth)s::text[])[1 + (n - 1) %% %(w)s], %(app)s, 'http://portal', '', "
            "%(product)s, 'user-1', now(), now() + interval '2 hours' "
            "FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS n",
            {"auth": world.authorization_ids, "w": len(world.authorization_ids),
             "app": world.app_id, "product": world.product_id, "lo": start + 1,
             "hi": start + count})
        conn.execute("ANALYZE auth_codes")


TABLES = ("charges", "deliveries", "webhook_events", "webhook_attempts", "idempotency_records")


def row_counts(url: str) -> dict[str, int]:
    with connect(url) as conn:
        counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # noqa: S608
                  for t in TABLES}
        counts["consumed codes"] = conn.execute(
            "SELECT count(*) FROM auth_codes WHERE consumed_at IS NOT NULL").fetchone()[0]
        return counts


def check_rows(url: str, before: dict[str, int], expected: int, what: str) -> None:
    after = row_counts(url)
    delta = {k: after[k] - before[k] for k in after}
    wrong = {k: v for k, v in delta.items() if v != expected}
    if wrong:
        raise RuntimeError(f"{what}: expected {expected} new rows in each table, got {delta}")


# --------------------------------------------------------------------------- observation


@dataclass
class DbStats:
    statements: float = 0.0  # per charge, every statement the server executed for the db
    commits: float = 0.0  # per charge
    exec_ms: float = 0.0  # server execution time per charge (incl. lock waits)
    top: list[tuple[str, float, float]] = field(default_factory=list)  # query, calls/charge, ms


class Observer:
    """pg_stat_statements / pg_stat_database deltas and pg_stat_activity samples of one db."""

    def __init__(self, pg: Postgres, db: str) -> None:
        self.pg, self.db = pg, db
        self._samples: list[dict[str, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._commits0 = 0

    def _commits(self, conn: Any) -> int:
        return int(conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s",
                                (self.db,)).fetchone()[0])

    def start(self) -> None:
        with connect(self.pg.url()) as conn:
            conn.execute("SELECT pg_stat_statements_reset()")
            conn.execute("SELECT pg_stat_clear_snapshot()")
            self._commits0 = self._commits(conn)
        self._samples = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        with connect(self.pg.url()) as conn:
            while not self._stop.wait(0.05):
                rows = conn.execute(
                    "SELECT state, wait_event_type FROM pg_stat_activity "
                    "WHERE datname = %s AND backend_type = 'client backend' "
                    "AND pid <> pg_backend_pid()", (self.db,)).fetchall()
                sample = {"executing": 0, "lock wait": 0, "idle in transaction": 0, "idle": 0}
                for state, wait_type in rows:
                    if state == "active":
                        sample["lock wait" if wait_type == "Lock" else "executing"] += 1
                    elif state and state.startswith("idle in transaction"):
                        sample["idle in transaction"] += 1
                    else:
                        sample["idle"] += 1
                self._samples.append(sample)

    def stop(self, charges: int) -> tuple[DbStats, dict[str, float]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with connect(self.pg.url()) as conn:
            time.sleep(0.6)  # pg_stat_database is flushed by backends at most every 500 ms
            conn.execute("SELECT pg_stat_clear_snapshot()")
            commits = self._commits(conn) - self._commits0
            rows = conn.execute(
                "SELECT s.query, s.calls, s.total_exec_time FROM pg_stat_statements s "
                "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = %s "
                "ORDER BY s.calls DESC, s.total_exec_time DESC", (self.db,)).fetchall()
        n = max(charges, 1)
        stats = DbStats(statements=sum(r[1] for r in rows) / n, commits=commits / n,
                        exec_ms=sum(r[2] for r in rows) / n,
                        top=[(" ".join(q.split())[:90], c / n, t / max(c, 1))
                             for q, c, t in rows if c >= n * 0.5])
        keys = ("executing", "lock wait", "idle in transaction", "idle")
        activity = {k: (statistics.fmean(s[k] for s in self._samples) if self._samples else 0.0)
                    for k in keys}
        return stats, activity


# --------------------------------------------------------------------------- the route


@dataclass
class Run:
    side: str  # "route" | "pgbench"
    charges: int
    seconds: float
    p50_ms: float
    p99_ms: float
    cpu: dict[str, float]  # process -> CPU seconds per 1,000 charges
    db: DbStats
    activity: dict[str, float]

    @property
    def rate(self) -> float:
        return self.charges / self.seconds


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def drive_payments(url: str, host: str, items: list[tuple[str, str, str]],
                         concurrency: int, spender: str,
                         tls: ssl.SSLContext | bool = True) -> tuple[float, list[float]]:
    """``items`` (code, idempotency key, wallet) POSTed to the product route at ``url``,
    ``concurrency`` at a time on keep-alive connections; wall time and each call's latency.
    Anything but 201 fails the run: a benchmark of errors is worthless."""
    import aiohttp

    latencies: list[float] = []
    failures: list[str] = []
    queue = list(reversed(items))
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency, ssl=tls)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:

        async def worker() -> None:
            while queue and not failures:
                code, key, wallet = queue.pop()
                headers = {"Host": host, "content-type": "application/json",
                           "x-wallet-address": wallet, "x-svc-budget-spender": spender}
                body = json.dumps({"authorizationCode": code, "idempotencyKey": key,
                                   "developerUserId": "user-1"})
                start = time.perf_counter()
                async with client.post(url, data=body, headers=headers) as response:
                    payload = await response.read()
                latencies.append(time.perf_counter() - start)
                if response.status != 201:
                    failures.append(f"{response.status} {payload[:300]!r}")

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - began
    if failures:
        raise RuntimeError(f"the product route answered {failures[0]} "
                           f"({len(failures)} failures): a benchmark of errors is worthless")
    return elapsed, latencies


async def _drive(port: int, host: str, items: list[tuple[str, str, int]], concurrency: int,
                 wallet_of: list[str], spender: str) -> tuple[float, list[float]]:
    return await drive_payments(f"http://127.0.0.1:{port}/api/pay/{APP_SLUG}/unlock-level",
                                host, [(code, key, wallet_of[owner])
                                       for code, key, owner in items],
                                concurrency, spender)


def run_route(pg: Postgres, router: Router, codes: list[tuple[str, int]], concurrency: int,
              wallets: list[str], spender: str, tag: str) -> Run:
    import uvloop

    url = pg.url("route")
    before = row_counts(url)
    observer = Observer(pg, "route")
    observer.start()
    items = [(code, f"bench-{tag}-{i}", owner) for i, (code, owner) in enumerate(codes)]
    pid = router.popen.pid
    ticks0 = {"router": _ticks(pid), "postgres": postgres_ticks(pg), "sys": _sys_ticks(pid),
              "pg sys": postgres_ticks(pg, system_only=True)}
    switches0 = _switches(pid)
    self0 = resource.getrusage(resource.RUSAGE_SELF)
    elapsed, latencies = uvloop.run(_drive(router.port, router.host, items, concurrency,
                                           wallets, spender))
    self1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = {"router": (_ticks(pid) - ticks0["router"]) / HZ,
           "router sys": (_sys_ticks(pid) - ticks0["sys"]) / HZ,
           "postgres": (postgres_ticks(pg) - ticks0["postgres"]) / HZ,
           "postgres sys": (postgres_ticks(pg, system_only=True) - ticks0["pg sys"]) / HZ,
           "client": (self1.ru_utime + self1.ru_stime) - (self0.ru_utime + self0.ru_stime),
           "router switches": switches_since(pid, switches0) / 1e3}  # x1e3 below: per charge
    db, activity = observer.stop(len(codes))
    check_rows(url, before, len(codes), "product route")
    return Run("route", len(codes), elapsed, 1e3 * percentile(latencies, 0.50),
               1e3 * percentile(latencies, 0.99),
               {k: 1e3 * v / len(codes) for k, v in cpu.items()}, db, activity)


# --------------------------------------------------------------------------- pgbench


def pgbench_argv(pg: Postgres, world: World, concurrency: int, seconds: int,
                 payload: str, response_body: str, log_prefix: Path | None) -> list[str]:
    argv = [str(PG_BIN / "pgbench"), "-n", "-M", "prepared", "-c", str(concurrency),
            "-j", "2", "-T", str(seconds), "-h", "127.0.0.1", "-p", str(pg.port),
            "-U", "postgres", "-f", str(SCRIPT),
            "-D", f"app_slug={APP_SLUG}", "-D", f"product_slug={world.product_slug}",
            "-D", f"app_id={world.app_id}", "-D", f"product_id={world.product_id}",
            "-D", f"amount={world.amount}", "-D", f"pay_to={world.pay_to}",
            "-D", f"event_payload={payload}", "-D", f"response_body={response_body}"]
    if log_prefix is not None:
        argv += ["-l", f"--log-prefix={log_prefix}"]
    return [*argv, "pgb"]


PGBENCH_DOC = ("pgbench -n -M prepared -c {c} -j 2 -T <seconds> -h 127.0.0.1 -p <pg> "
               "-U postgres -f bench/ledger/charge.sql -D app_slug=bench "
               "-D product_slug=unlock-level -D app_id=<id> -D product_id=<id> "
               "-D amount=30000 -D pay_to=<address> -D event_payload=<the route's JSON> "
               "-D response_body=<the route's JSON> -l --log-prefix=<tmp> pgb")


def run_pgbench(pg: Postgres, world: World, concurrency: int, seconds: int, payload: str,
                response_body: str, tmp: Path, *, observe: bool = True) -> Run:
    url = pg.url("pgb")
    before = row_counts(url)
    observer = Observer(pg, "pgb")
    if observe:
        observer.start()
    logs = tmp / f"pgblog-{time.monotonic_ns()}"
    logs.mkdir()
    pg0, pgsys0 = postgres_ticks(pg), postgres_ticks(pg, system_only=True)
    child0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(pgbench_argv(pg, world, concurrency, seconds, payload, response_body,
                                       logs / "txn"),
                          capture_output=True, text=True, timeout=seconds + 120, check=False)
    child1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    pg_cpu = (postgres_ticks(pg) - pg0) / HZ
    pg_sys = (postgres_ticks(pg, system_only=True) - pgsys0) / HZ
    out = done.stdout + done.stderr
    processed = re.search(r"number of transactions actually processed: (\d+)", out)
    failed = re.search(r"number of failed transactions: (\d+)", out)
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out)
    if done.returncode != 0 or not processed or not tps or (failed and int(failed.group(1))):
        raise RuntimeError(f"pgbench failed ({done.returncode}):\n{out[-3000:]}")
    count = int(processed.group(1))
    latencies: list[float] = []
    for path in logs.iterdir():
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3:
                latencies.append(int(parts[2]) / 1e6)
    shutil.rmtree(logs, ignore_errors=True)
    if len(latencies) != count:
        raise RuntimeError(f"pgbench logged {len(latencies)} transactions, reported {count}")
    db, activity = observer.stop(count) if observe else (DbStats(), {})
    check_rows(url, before, count, "pgbench")
    pgbench_cpu = (child1.ru_utime + child1.ru_stime) - (child0.ru_utime + child0.ru_stime)
    # tps "without initial connection time" is pgbench's own measure; seconds = count / tps.
    return Run("pgbench", count, count / float(tps.group(1)), 1e3 * percentile(latencies, 0.5),
               1e3 * percentile(latencies, 0.99),
               {"postgres": 1e3 * pg_cpu / count, "postgres sys": 1e3 * pg_sys / count,
                "client": 1e3 * pgbench_cpu / count},
               db, activity)


# --------------------------------------------------------------------------- profile


class _Snapshot:
    """What pstats needs from a profiler, without disabling it (see ``serve_profiled``)."""

    def __init__(self, profiler: cProfile.Profile) -> None:
        self.profiler = profiler
        self.stats: dict[Any, Any] = {}

    def create_stats(self) -> None:
        self.profiler.snapshot_stats()
        self.stats = self.profiler.stats


def serve_profiled(out: Path) -> None:
    """The router as ``svc-server serve`` runs it, with cProfile in every thread on demand.

    SIGUSR1 starts profiling the event loop thread and every thread started from then on
    (the anyio worker threads that run the database work start on first use), with each
    thread's own CPU clock; SIGUSR2 writes the merged stats to ``out``.
    """
    import uvicorn

    from router.app import create_app
    from router.cli import server_config
    from router.settings import load_settings

    settings = load_settings()
    profilers: list[cProfile.Profile] = []

    def thread_hook(frame: Any, event: str, arg: Any) -> None:
        profiler = cProfile.Profile(time.thread_time)
        profilers.append(profiler)
        profiler.enable()

    def start(*_: object) -> None:
        threading.setprofile(thread_hook)
        main = cProfile.Profile(time.thread_time)
        profilers.insert(0, main)
        main.enable()

    def stop(*_: object) -> None:
        threading.setprofile(None)
        stats = pstats.Stats(profilers[0])  # this (main) thread's: disabled and flushed
        # A worker's profiler is only read: disable() from this thread would close its
        # open frames (an idle worker's queue wait) with this thread's clock.
        for profiler in profilers[1:]:
            stats.add(_Snapshot(profiler))  # type: ignore[arg-type]
        stats.dump_stats(str(out) + ".tmp")
        Path(str(out) + ".tmp").rename(out)
        (out.parent / (out.name + ".threads")).write_text(str(len(profilers)))

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    uvicorn.Server(server_config(create_app(settings), settings, log_level="warning")).run()


AREAS = (
    ("/psycopg/", "psycopg (driver, Python part)"),
    ("/sqlalchemy/orm/", "SQLAlchemy ORM (session, unit of work, loading)"),
    ("/sqlalchemy/", "SQLAlchemy Core/engine/pool"),
    ("/starlette/", "starlette"),
    ("/uvicorn/", "uvicorn"),
    ("/anyio/", "anyio (thread hop)"),
    ("/payments/", "payments (our code)"),
    ("/router/", "router (our code)"),
    ("/asyncio/", "asyncio"),
    ("/threading.py", "threading / queue (thread hop)"),
    ("/queue.py", "threading / queue (thread hop)"),
    ("/json/", "json"),
    ("/enum.py", "enum"),
)


def area_of(filename: str, func: str) -> str:
    for marker, area in AREAS:
        if marker in filename:
            return area
    if filename == "~":
        if "psycopg" in func or "pq" in func.split(".")[0]:
            return "psycopg (C: libpq, send/recv)"
        if "lock" in func or "acquire" in func:
            return "threading / queue (thread hop)"
        return "builtins (C)"
    return "other Python"


@dataclass
class Profile:
    charges: int
    seconds: float
    cpu_seconds: float
    threads: int
    areas: list[tuple[str, float]]
    top: list[tuple[str, float, int]]  # function, own CPU ms per charge, calls per charge
    cumulative: list[tuple[str, float, int]]
    db: DbStats


def profile_router(pg: Postgres, tmp: Path, codes: list[tuple[str, int]], concurrency: int,
                   wallets: list[str], spender: str) -> Profile:
    stats_file = tmp / "router.prof"
    router = start_router(pg.url("route"), tmp, profile_out=stats_file)
    try:
        pid = router.popen.pid
        before = _ticks(pid)
        observer = Observer(pg, "route")
        observer.start()
        os.kill(pid, signal.SIGUSR1)
        time.sleep(0.3)
        import uvloop
        elapsed, _ = uvloop.run(_drive(router.port, router.host,
                                       [(c, f"bench-prof-{i}", owner)
                                        for i, (c, owner) in enumerate(codes)],
                                       concurrency, wallets, spender))
        os.kill(pid, signal.SIGUSR2)
        cpu = (_ticks(pid) - before) / HZ
        db, _ = observer.stop(len(codes))
        deadline = time.monotonic() + 60
        while not stats_file.exists():
            if time.monotonic() > deadline or router.popen.poll() is not None:
                raise RuntimeError(f"no profile written:\n{router.tail()}")
            time.sleep(0.1)
    finally:
        router.stop()
    threads = int((tmp / "router.prof.threads").read_text())
    stats = pstats.Stats(str(stats_file))
    raw = stats.stats  # type: ignore[attr-defined]
    n = len(codes)
    areas: dict[str, float] = {}
    for (filename, _, func), (_, _, tt, _, _) in raw.items():
        key = area_of(filename, func)
        areas[key] = areas.get(key, 0.0) + tt
    total = sum(areas.values())

    def name(key: tuple[str, int, str]) -> str:
        filename, line, func = key
        short = re.sub(r"^.*?/(site-packages|lib/python3\.\d+|main)/", "", filename)
        return f"{func} ({short}:{line})" if filename != "~" else func

    top = sorted(raw.items(), key=lambda kv: -kv[1][2])[:12]
    cumulative = sorted(raw.items(), key=lambda kv: -kv[1][3])[:18]
    return Profile(
        charges=n, seconds=elapsed, cpu_seconds=cpu, threads=threads,
        areas=sorted(((k, v / total) for k, v in areas.items()), key=lambda kv: -kv[1]),
        top=[(name(k), 1e3 * v[2] / n, round(v[1] / n)) for k, v in top],
        cumulative=[(name(k), 1e3 * v[3] / n, round(v[1] / n)) for k, v in cumulative],
        db=db)


# --------------------------------------------------------------------------- report


def command_output(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except OSError as exc:
        return f"unavailable ({exc})"
    text = (done.stdout + done.stderr).strip()
    return text.splitlines()[0] if text else ""


def machine(pg: Postgres) -> dict[str, str]:
    from importlib.metadata import version

    with connect(pg.url()) as conn:
        server = conn.execute("SELECT version()").fetchone()[0].split(",")[0]
    libs = ", ".join(f"{name} {version(name)}" for name in
                     ("sqlalchemy", "psycopg", "uvicorn", "uvloop", "starlette", "anyio",
                      "aiohttp"))
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "uname -m": platform.machine(),
        "nproc": command_output(["nproc"]),
        "python": platform.python_version(),
        "postgres": server,
        "pgbench": command_output([str(PG_BIN / "pgbench"), "--version"]),
        "libraries": libs,
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def med(runs: list[Run], attr: str) -> float:
    return float(statistics.median(getattr(r, attr) for r in runs))


def render(info: dict[str, str], route: list[Run], pgb: list[Run], options: argparse.Namespace,
           pgbench_seconds: int, warm: tuple[Run, Run], profile: Profile | None) -> str:
    ratios = [r.rate / p.rate for r, p in zip(route, pgb, strict=True)]
    ratio = statistics.median(ratios)
    met = ratio >= TARGET_RATIO
    c = options.concurrency
    lines = [
        HEADING, "",
        f"Run {info['date']} on `{info['uname -m']}`, nproc {info['nproc']}, Python "
        f"{info['python']}, {info['postgres']}, {info['pgbench']}; {info['libraries']}. "
        f"Load average at start: {info['load']} (shared machine: compare the ratio, measured "
        "in the same run, not the absolute figures).", "",
        f"Load: {options.charges:,} charges per round through `POST /api/pay/{APP_SLUG}/"
        f"unlock-level` with {c} concurrent requests, vs `pgbench -c {c} -j 2 -T "
        f"{pgbench_seconds}` running `bench/ledger/charge.sql` (the same statements in one "
        f"transaction per charge); {len(route)} rounds, interleaved (order alternating), after "
        f"a warm-up of both; {options.wallets} paying wallet"
        f"{'' if options.wallets == 1 else 's'} (authorization rows). Every route call answered "
        "201 and each run left exactly one new charge, delivery, webhook event, webhook "
        "attempt, idempotency record and consumed payment code per charge (checked by "
        "counting rows).", "",
        "| Side | Charges/s | p50 | p99 | vs pgbench |",
        "|---|---:|---:|---:|---:|",
        f"| product route (`svc-server serve`, uvicorn, 1 process) | {med(route, 'rate'):,.0f} "
        f"| {med(route, 'p50_ms'):.1f} ms | {med(route, 'p99_ms'):.1f} ms | **{ratio:.2f}** |",
        f"| pgbench, same SQL, `-M prepared` | {med(pgb, 'rate'):,.0f} | "
        f"{med(pgb, 'p50_ms'):.1f} ms | {med(pgb, 'p99_ms'):.1f} ms | 1.00 |",
        "",
        f"Target: product route >= {TARGET_RATIO:.0%} of the pgbench rate: **{ratio:.0%}** "
        f"(median of the per-round ratios {', '.join(f'{x:.2f}' for x in ratios)}), "
        f"{'met' if met else '**MISSED**'}.", "",
        "Raw rounds (CPU in ms per charge of each process, from /proc and getrusage, with the "
        "system CPU of the router and of PostgreSQL in brackets, and the context switches of all "
        "the router's threads per charge; "
        "statements = per charge as pg_stat_statements counts them for that database; it "
        "shows the route's BEGIN and COMMIT but neither its pool "
        "pre-ping (`;`, an empty query that is one more round trip and one more commit per "
        "charge) nor pgbench's BEGIN/END (extended protocol): both sides make 13 data "
        "statements per charge, in round trips 16 for the route and 15 for pgbench; DB time "
        "= their execution "
        "time per charge, lock waits included; backends = mean of pg_stat_activity samples "
        "every 50 ms: executing / waiting on a lock / idle in transaction, i.e. waiting for "
        "the client):", "",
        "| Round | Side | Charges | Seconds | Charges/s | p50 | p99 | Statements | Commits | "
        "DB time | CPU app | CPU postgres | CPU client | Backends exec/lock/idle-in-tx |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]

    def row(label: str, run: Run) -> str:
        a = run.activity
        acts = (f"{a['executing']:.1f} / {a['lock wait']:.1f} / {a['idle in transaction']:.1f}"
                if a else "-")
        app = (f"{run.cpu['router']:.2f} (sys {run.cpu['router sys']:.2f}; "
               f"{run.cpu['router switches']:.0f} ctx sw)" if "router" in run.cpu else "-")
        return (f"| {label} | {run.side} | {run.charges:,} | {run.seconds:.1f} | "
                f"{run.rate:,.0f} | {run.p50_ms:.1f} ms | {run.p99_ms:.1f} ms | "
                f"{run.db.statements:.1f} | {run.db.commits:.2f} | {run.db.exec_ms:.2f} ms | "
                f"{app} | {run.cpu['postgres']:.2f} (sys {run.cpu['postgres sys']:.2f}) | "
                f"{run.cpu['client']:.2f} | {acts} |")

    lines.append(row("warm-up", warm[0]))
    lines.append(row("warm-up", warm[1]))
    for i, (r, p) in enumerate(zip(route, pgb, strict=True)):
        first, second = (r, p) if i % 2 == 0 else (p, r)
        lines += [row(str(i + 1), first), row(str(i + 1), second)]
    last_r, last_p = route[-1], pgb[-1]
    lines += ["", "Statements per charge in the last round (calls per charge, mean server time "
              "per call):", "", "| Product route | Calls | Mean | pgbench | Calls | Mean |",
              "|---|---:|---:|---|---:|---:|"]
    left, right = last_r.db.top, last_p.db.top
    for i in range(max(len(left), len(right))):
        lc = (f"`{left[i][0]}` | {left[i][1]:.2f} | {left[i][2]:.3f} ms" if i < len(left)
              else " | | ")
        rc = (f"`{right[i][0]}` | {right[i][1]:.2f} | {right[i][2]:.3f} ms" if i < len(right)
              else " | | ")
        lines.append(f"| {lc} | {rc} |")
    if profile is not None:
        lines += [
            "", f"Router profile (`--profile-charges {profile.charges}`: a fresh router under "
            "cProfile in every thread, CPU clock, same load; not part of the figures above): "
            f"{profile.charges / profile.seconds:,.0f} charges/s under the profiler, "
            f"{1e3 * profile.cpu_seconds / profile.charges:.2f} ms router CPU per charge, "
            f"{profile.threads} profiled threads, {profile.db.statements:.1f} statements and "
            f"{profile.db.commits:.2f} commits per charge. Own CPU time by area:", "",
            "| Area | Share |", "|---|---:|"]
        lines += [f"| {k} | {v:.1%} |" for k, v in profile.areas if v >= 0.005]
        lines += ["", "| Function (cumulative) | CPU ms/charge | Calls/charge |",
                  "|---|---:|---:|"]
        lines += [f"| `{f}` | {ms:.3f} | {calls} |" for f, ms, calls in profile.cumulative]
        lines += ["", "| Function (own time) | CPU ms/charge | Calls/charge |",
                  "|---|---:|---:|"]
        lines += [f"| `{f}` | {ms:.3f} | {calls} |" for f, ms, calls in profile.top]
    lines += [
        "", "Configuration:", "",
        f"- PostgreSQL: a throwaway cluster (`initdb -A trust -E UTF8`), options `{PG_OPTIONS}`"
        " (those of `tests/support/services.py` plus pg_stat_statements, which both sides pay "
        "for); databases `route` and `pgb`, each migrated with `payments.migrate.upgrade` and "
        "seeded alike: app `bench` (pay_to set, recipient allowlisted), product `unlock-level` "
        f"(30,000 atomic, optimistic), {options.wallets} active authorization"
        f"{'' if options.wallets == 1 else 's'} of 9e18 atomic. Clients connect over TCP "
        "127.0.0.1.",
        f"- product route: `{ROUTER_ENV_DOC} .venv/bin/svc-server serve` (one uvicorn process, "
        "uvloop, httptools, SQLAlchemy pool 10 + 20 overflow with pre-ping, anyio worker "
        f"threads, {os.environ.get('SVCSRV_DB_WORKERS', '4')} database worker slots; chain "
        "settlement/relay workers and the webhook dispatcher off in the server process, as in "
        "production on PostgreSQL where they run as their own `svc-ops` processes, and pgbench "
        "settles and sends nothing either). "
        "Payment codes pre-issued with `payments.ledger.codes.issue(session, "
        "CodeKind.PAYMENT, ...)` bound to the product (authorizations round-robin). Client: "
        f"this script, aiohttp on uvloop, {c} concurrent keep-alive requests, each "
        "`{authorizationCode, idempotencyKey, developerUserId}` with `x-wallet-address` and "
        "`x-svc-budget-spender`; latency = send to full response, charges/s = N / wall time "
        "of the batch.",
        f"- pgbench: `{PGBENCH_DOC.format(c=c)}`; codes pre-seeded as `sha256('pgb-code-<n>')`"
        ", consumed in sequence order (`bench_code_seq`); charges/s = pgbench's tps without "
        "initial connection time; p50/p99 from its per-transaction log.",
    ]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the run


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def describe(run: Run) -> str:
    return (f"{run.side:7s} {run.charges:7,} charges {run.seconds:6.1f} s {run.rate:8,.0f}/s "
            f"p50 {run.p50_ms:6.1f} ms p99 {run.p99_ms:6.1f} ms  {run.db.statements:.1f} "
            f"stmts/charge  cpu ms/charge {', '.join(f'{k} {v:.2f}' for k, v in run.cpu.items())}"
            f"  backends {', '.join(f'{k} {v:.1f}' for k, v in run.activity.items())}")


def benchmark(options: argparse.Namespace) -> int:
    from payments.chain.params import in_process_params
    from tests.ledger.flow import wallet

    spender = in_process_params().spender
    wallets = [str(wallet(i).address) for i in range(options.wallets)]
    tmp = Path(tempfile.mkdtemp(prefix="ledger-bench-"))
    tmp.chmod(0o755)
    router: Router | None = None
    try:
        with postgres_server() as pg:
            info = machine(pg)
            log(f"postgres on port {pg.port}; {info['postgres']}")
            with connect(pg.url()) as conn:
                conn.execute("CREATE DATABASE route")
                conn.execute("CREATE DATABASE pgb")
                conn.execute("CREATE EXTENSION pg_stat_statements")
            route_world = seed_world(pg.url("route"), options.wallets)
            pgb_world = seed_world(pg.url("pgb"), options.wallets)
            warm_n = max(200, options.charges // 5)
            total = warm_n + options.rounds * options.charges + options.profile_charges
            router = start_router(pg.url("route"), tmp)
            portal = f"http://portal.localhost:{router.port}"
            log(f"router on port {router.port}; issuing {total:,} payment codes")
            codes = issue_codes(pg.url("route"), route_world, total, portal)
            seeded = 0
            first = 100_000
            seed_pgbench_codes(pg.url("pgb"), pgb_world, seeded, first)
            seeded += first

            taken = 0

            def take(n: int) -> list[tuple[str, int]]:
                nonlocal taken
                batch = codes[taken:taken + n]
                taken += n
                return batch

            log(f"warm-up: {warm_n} route charges")
            warm_route = run_route(pg, router, take(warm_n), options.concurrency, wallets,
                                   spender, "warm")
            log(describe(warm_route))
            with connect(pg.url("route")) as conn:
                payload = conn.execute("SELECT payload::text FROM webhook_events "
                                       "ORDER BY created_at DESC LIMIT 1").fetchone()[0]
                response_body = conn.execute("SELECT response_body::text FROM "
                                             "idempotency_records ORDER BY id DESC LIMIT 1"
                                             ).fetchone()[0]
            # As long as the route's warm-up predicts N charges take, at least 5 s.
            seconds = (options.pgbench_seconds
                       or max(5, round(options.charges / warm_route.rate)))
            warm_seconds = min(3, seconds)
            log(f"warm-up: pgbench {warm_seconds} s (measured runs: -T {seconds})")
            warm_pgb = run_pgbench(pg, pgb_world, options.concurrency, warm_seconds, payload,
                                   response_body, tmp)
            log(describe(warm_pgb))
            route_runs: list[Run] = []
            pgb_runs: list[Run] = []
            consumed = warm_pgb.charges
            for i in range(options.rounds):
                need = int(2 * max([warm_pgb.rate, *(r.rate for r in pgb_runs)]) * seconds)
                if seeded - consumed < need:
                    log(f"seeding {need:,} more pgbench codes")
                    seed_pgbench_codes(pg.url("pgb"), pgb_world, seeded, need)
                    seeded += need
                order = ("route", "pgbench") if i % 2 == 0 else ("pgbench", "route")
                for side in order:
                    if side == "route":
                        run = run_route(pg, router, take(options.charges), options.concurrency,
                                        wallets, spender, f"r{i}")
                        route_runs.append(run)
                    else:
                        run = run_pgbench(pg, pgb_world, options.concurrency, seconds, payload,
                                          response_body, tmp)
                        consumed += run.charges
                        pgb_runs.append(run)
                    log(f"round {i + 1}: {describe(run)}")
            router.stop()
            router = None
            prof = None
            if options.profile_charges:
                log(f"profiling the router over {options.profile_charges} charges")
                prof = profile_router(pg, tmp, take(options.profile_charges),
                                      options.concurrency, wallets, spender)
                log(f"profile: {prof.charges / prof.seconds:,.0f} charges/s, "
                    f"{1e3 * prof.cpu_seconds / prof.charges:.2f} ms CPU/charge")
        section = render(info, route_runs, pgb_runs, options, seconds, (warm_route, warm_pgb),
                         prof)
        print(section)
        if not options.dry_run:
            write_section(HEADING, section)
            log(f"wrote the section to {REPORT}")
        ratio = statistics.median(r.rate / p.rate for r, p in zip(route_runs, pgb_runs,
                                                                   strict=True))
        return 0 if ratio >= TARGET_RATIO else 1
    finally:
        if router is not None:
            router.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--charges", type=int, default=3000, help="route charges per round")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--wallets", type=int, default=1,
                        help="authorizations the charges are spread over (1: one hot row)")
    parser.add_argument("--profile-charges", type=int, default=1000,
                        help="charges to drive at a router under cProfile afterwards (0: skip)")
    parser.add_argument("--dry-run", action="store_true", help="print only, write no docs")
    parser.add_argument("--pgbench-seconds", type=int, default=0,
                        help="pgbench's -T per round (0: as long as the route's warm-up "
                             "predicts --charges take, at least 5 s)")
    parser.add_argument("--serve-profiled", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve_profiled:
        serve_profiled(options.serve_profiled)
        return 0
    if not (100 <= options.charges <= 100_000 and 1 <= options.concurrency <= 200
            and 1 <= options.rounds <= 10 and 1 <= options.wallets <= 1000
            and 0 <= options.profile_charges <= 20_000 and 0 <= options.pgbench_seconds <= 600):
        parser.error("out of range: --charges 100..100000, --concurrency 1..200, --rounds "
                     "1..10, --wallets 1..1000, --profile-charges 0..20000, "
                     "--pgbench-seconds 0..600")
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGALRM, _on_signal)
    signal.alarm(TIME_LIMIT)
    return benchmark(options)


if __name__ == "__main__":
    raise SystemExit(main())
