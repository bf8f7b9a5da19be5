"""The benchmarks of bench/ still run: each at its smallest size, as its own process, as a
person runs it, and always with --dry-run (nothing in docs/ or bench/proxy_cases.json is
written, which every test checks). A bench is a harness around the code it measures and
can stop working when that code changes with nothing noticing: bench/fast_path_cpu.py
stopped at the first request once router/turns.py came (d837b7b). The figures are checked
for their shape, never their values: this 2-core machine is shared, and at these sizes the
numbers mean nothing.

A bench that measures against a target exits 1 when the target is missed, which a run this
small may well do; a crash also exits 1, but with a traceback and without the figures, so
each test asserts the figures and no traceback rather than the exit code alone.

Run here (about 70 s together on this 2-core machine, all on one pytest-xdist worker:
tests/conftest.py ``_ONE_WORKER``, so no two of them run at once):

- fast_path_cpu.py: a timed GET round, and the counted POST;
- gas_bench.py, settlement_bench.py (one round of 20 charges);
- config_bench.py (10 products, SQLite and PostgreSQL);
- webhook_bench.py (50 events, 5 charges), ledger_bench.py (100 charges, 1 s of pgbench);
- proxy_bench.py --profile: its setup (nginx, Redis, the router as ``svc-server serve``
  runs it, the reference), a second of wrk on the router and the profile's report;
- case_profile.py post: bench/case_targets.py's bed and origins, case 2's wrk script;
- proxy_cases.py --render-only: the kept figures (bench/proxy_cases.json) still render;
- startup_bench.py (one round on SQLite: a server of one process, then of two, and two
  `svc-ops` commands, about 12 s).

Left out, each for its time at its smallest settings on this machine:

- proxy_bench.py's measured run (25 s: five targets, each with a 2 s warm-up); its setup
  and load are those of --profile above;
- proxy_cases.py's cases (16 to 30 s each at --duration 1 --rounds 1: fixed warm-ups, and
  up to 10,000 connections), connection_cpu.py (25 s) and case_profile.py's accept and
  arrivals (fixed 8 s and 4 s loads, 12 to 27 s); their pure parts are
  tests/unit/test_proxy_case_figures.py's, their load generators
  tests/unit/test_proxy_case_load.py's;
- topology_bench.py --quick (60 s: the whole cluster, twice);
- quickstart_bench.py (16 s): tests/runtime/test_quickstart.py runs its flow;
- fast_path_cpu.py --against and startup_bench.py --against (each adds a git worktree of
  the repository, and times both trees).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
# What a bench writes when not told --dry-run: none of it may change here.
WRITTEN = (ROOT / "docs" / "BENCHMARKS.md", ROOT / "docs" / "deploy.md",
           BENCH / "proxy_cases.json")
FIGURE = r"[\d,]+(?:\.\d+)?"  # 1,234 or 12.34



def require_wrk_and_nginx() -> None:
    """scripts/install.sh installs both: missing, the bench fails here by name (no skip)."""
    assert shutil.which("wrk") and shutil.which("nginx"), "wrk and nginx (scripts/install.sh)"


@pytest.fixture(autouse=True)
def nothing_written() -> Iterator[None]:
    before = {path: path.read_bytes() for path in WRITTEN}
    yield
    assert {path: path.read_bytes() for path in WRITTEN} == before, "a bench wrote its report"


def run_bench(script: str, *args: str, exits: tuple[int, ...] = (0,)) -> str:
    """Run ``bench/<script> <args>``; its stdout and stderr together."""
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                         if p)}
    done = subprocess.run([sys.executable, str(BENCH / script), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=110, check=False)
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output[-4000:]
    assert done.returncode in exits, output[-4000:]
    return output


def lines(pattern: str, output: str) -> list[re.Match[str]]:
    """Every line of ``output`` that is ``pattern`` whole."""
    return list(re.finditer(rf"^{pattern}$", output, re.MULTILINE))


def test_fast_path_cpu_times_get_requests() -> None:
    output = run_bench("fast_path_cpu.py", "--requests", "200", "--rounds", "1")
    assert len(lines(r"round 1: \d+\.\d\d us CPU per GET request", output)) == 1
    (median,) = lines(r"median: (\d+\.\d\d) us", output)
    assert float(median[1]) > 0


def test_fast_path_cpu_counts_a_post() -> None:
    output = run_bench("fast_path_cpu.py", "--count", "--post")
    (counted,) = lines(r"(\d+) bytecodes and (\d+) calls per POST 16 KB request .*", output)
    assert int(counted[1]) > 0 and int(counted[2]) > 0


def test_startup_bench() -> None:
    output = run_bench("startup_bench.py", "--rounds", "1", "--backend", "sqlite", "--dry-run")
    started = ("svc-server serve, 1 process, sqlite", "svc-server serve, 2 processes, sqlite",
               "svc-ops --help", "svc-ops db-revision")
    for label in started:
        assert len(lines(rf"round 1: {re.escape(label)}: here {FIGURE} s CPU / {FIGURE} s "
                         "wall", output)) == 1
        assert len(lines(rf"\| {re.escape(label)} \| {FIGURE} s \| {FIGURE} s \|",
                         output)) == 1


def test_gas_bench() -> None:
    output = run_bench("gas_bench.py", "--dry-run", exits=(0, 1))
    rows = lines(rf"\| [^|]+ \| \d+ \| \d+ \| {FIGURE} \| {FIGURE} \| {FIGURE} \|", output)
    assert len(rows) == 7  # one `charge`, then batches of 10, 50 and 100 for two shapes
    assert len(lines(rf"target (met|MISSED): {FIGURE} gas/charge", output)) == 1


def test_signature_bench() -> None:
    output = run_bench("signature_bench.py", "--rounds", "1", "--count", "5", "--dry-run")
    rows = lines(rf"\| [^|]+ \| {FIGURE} ms \| {FIGURE} ms \| \*\*{FIGURE}x\*\* \|", output)
    assert len(rows) == 3  # a permit verified, an owner proof recovered, a transaction signed


def test_settlement_bench() -> None:
    output = run_bench("settlement_bench.py", "--charges", "20", "--rounds", "1", "--dry-run")
    assert len(lines(rf"round 1: worker {FIGURE}/s \(1 batches\), reference {FIGURE}/s",
                     output)) == 1
    assert len(lines(rf"\| 1 \| {FIGURE} \| {FIGURE} \| \d+\.\d\d \| 1 \|", output)) == 1
    assert re.search(r"^Median ratio \d+\.\d\d:", output, re.MULTILINE)


def test_config_bench_on_both_backends() -> None:
    output = run_bench("config_bench.py", "--products", "10", "--changes", "2", "--rounds",
                       "1", "--backend", "both", "--dry-run", exits=(0, 1))
    operation = r"\w+ \w+ \d+ ms \(\d+ st\)"
    for backend in ("sqlite", "postgresql"):
        assert len(lines(rf"\[{backend}\] round 1: reference \d+ ms(, {operation}){{6}}",
                         output)) == 1
    for backend in ("SQLite", "PostgreSQL"):
        assert f"**{backend}**" in output
    rows = lines(rf"\| (plan|apply): [^|]+ \| {FIGURE} ms \| {FIGURE} ms \| [\d.]+ \| \d+ "
                 r"\| < \d s \((met|MISSED)\) \|", output)
    assert len(rows) == 2 * 6  # per backend: plan and apply of create, no-op, prices


def test_webhook_bench() -> None:
    output = run_bench("webhook_bench.py", "--events", "50", "--charges", "5", "--rounds", "1",
                       "--dry-run", exits=(0, 1))
    assert len(lines(rf"round 1: dispatcher {FIGURE}/s, reference {FIGURE}/s \(\d+\.\d\d\)",
                     output)) == 1
    assert len(lines(rf"deliveries/s {FIGURE} \(reference {FIGURE}\); charge-to-receipt p50 "
                     rf"{FIGURE} ms p99 {FIGURE} ms; pay answer p50 {FIGURE} ms", output)) == 1
    assert len(lines(rf"\| charge to receipt( \| {FIGURE} ms){{4}} \|", output)) == 1


def test_ledger_bench() -> None:
    output = run_bench("ledger_bench.py", "--charges", "100", "--concurrency", "8", "--rounds",
                       "1", "--profile-charges", "0", "--pgbench-seconds", "1", "--dry-run",
                       exits=(0, 1))
    for side, charges in (("route", "100"), ("pgbench", FIGURE)):
        assert len(lines(rf"\[[\d:]+\] round 1: {side}\s+{charges} charges\s+{FIGURE} s\s+"
                         rf"{FIGURE}/s p50\s+{FIGURE} ms p99\s+{FIGURE} ms .*", output)) == 1
    assert len(lines(rf"\| product route [^|]+ \| {FIGURE} \| {FIGURE} ms \| {FIGURE} ms \| "
                     rf"\*\*\d+\.\d\d\*\* \|", output)) == 1
    assert len(lines(r"Target: product route >= \d+% of the pgbench rate: \*\*\d+%\*\* .*",
                     output)) == 1


def test_proxy_bench_profile() -> None:
    require_wrk_and_nginx()
    output = run_bench("proxy_bench.py", "--profile", "--duration", "1")
    assert len(lines(rf"router under cProfile: {FIGURE} req/s, p99 {FIGURE} ms, {FIGURE} CPU "
                     rf"s in {FIGURE} s, .*", output)) == 1
    assert "own time by area" in output
    assert lines(r"\s+[\d.]+%\s+[\d.]+ s  router \(our code\)", output)
    assert len(lines(r"per request: \d+ us CPU under the profiler", output)) == 1


def test_case_profile_post() -> None:
    require_wrk_and_nginx()
    output = run_bench("case_profile.py", "post", "--duration", "1")
    assert len(lines(r"Requests/sec:\s+[\d.]+", output)) == 1
    assert lines(r"\s+[\d.]+%\s+[\d.]+ s  router \(our code\)", output)


def test_proxy_cases_render_the_kept_figures() -> None:
    output = run_bench("proxy_cases.py", "--render-only", "--dry-run")
    assert output.startswith("## Router cases vs nginx (bench/proxy_cases.py)\n"), output[:500]
    kept = json.loads((BENCH / "proxy_cases.json").read_text())
    for case in kept:
        assert len(lines(rf"### Case {int(case)}: .+ \((all targets met|below target)\)",
                         output)) == 1
