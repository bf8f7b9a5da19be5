"""The pure part of bench/topology_bench.py (bench/topology_figures.py): the access log's
split over instances, per-round ratios, growth, and the sections it writes. The benchmark
itself starts two topologies and runs for minutes; it is not part of the suite."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def figures() -> ModuleType:
    sys.path.insert(0, str(BENCH))  # the benches import each other as top-level modules
    try:
        return importlib.import_module("topology_figures")
    finally:
        sys.path.remove(str(BENCH))


def sample(rps: float, p99: float = 2.0, **cpu: float) -> Any:
    proxy_bench = sys.modules["proxy_bench"]
    return proxy_bench.Sample(rps=rps, p50_ms=1.0, p99_ms=p99, requests=int(rps * 8),
                              bytes_per_request=1100.0, errors="", cpu=dict(cpu))


def payments(figures: ModuleType, rate: float, busy: float = 1.9, **cpu: float) -> Any:
    ledger_bench = sys.modules["ledger_bench"]
    run = ledger_bench.Run("route", int(rate * 5), 5.0, 50.0, 90.0, dict(cpu),
                           ledger_bench.DbStats(), {})
    return figures.Payments(run, busy)


def phase(figures: ModuleType, instances: int, lb: list[float], nginx: list[float],
          route: list[float], pgbench: list[float]) -> Any:
    made = figures.Phase(instances, 2)
    made.lb = [sample(r, machine=200.0, instances=120.0, edge=40.0) for r in lb]
    made.nginx = [sample(r, machine=190.0, edge=80.0) for r in nginx]
    made.route = [payments(figures, r, instances=4.0, postgres=2.5) for r in route]
    made.pgbench = [payments(figures, r, postgres=2.0) for r in pgbench]
    made.runtime_split = {f"127.0.0.1:{i + 1}": 100 * (i + 1) for i in range(instances)}
    made.pay_split = {f"127.0.0.1:{i + 1}": 10 for i in range(instances)}
    return made


INFO = {"date": "2026-11-25 12:00 UTC", "uname -m": "x86_64", "nproc": "2",
        "python": "3.11.7", "nginx": "nginx/1.22.1", "wrk": "wrk 4.1.0",
        "postgres": "postgres (PostgreSQL) 15.18", "pgbench": "pgbench 15.18",
        "libraries": "uvicorn 0.54.0", "load at start": "4.10 4.84 3.93",
        "load at end": "5.00 4.90 4.00"}
CONFIG = {"postgres": "PostgreSQL with fsync off.", "workers": "No workers.",
          "duration": "8", "charges": "2,000 charges", "concurrency": "32", "wallets": "16",
          "details": "edge: nginx\norigin: nginx", "reference": "The reference is nginx."}


def test_split_counts_runtime_and_payments_per_instance_and_skips_the_reference(
        figures: ModuleType) -> None:
    lines = [
        "200 GET bench.apps.localhost:8443/ 127.0.0.1:2001 200 0.001",
        "200 GET bench.apps.localhost:8443/ 127.0.0.1:2002 200 0.001",
        "200 GET bench.apps.localhost:8443/ 127.0.0.1:2002 200 0.001",
        "201 POST api.localhost:8443/api/pay/bench/unlock-level 127.0.0.1:2001 201 0.010",
        # the reference block: nginx straight to the origin, not an instance
        "200 GET bench.apps.localhost:8443/ 127.0.0.1:3000 200 0.001",
        "200 GET api.localhost:8443/healthz 127.0.0.1:2001 200 0.001",  # neither
        "garbled",
    ]
    runtime, pay = figures.split(lines, ["127.0.0.1:2001", "127.0.0.1:2002"])
    assert runtime == {"127.0.0.1:2001": 1, "127.0.0.1:2002": 2}
    assert pay == {"127.0.0.1:2001": 1, "127.0.0.1:2002": 0}
    assert figures.shares(runtime) == "33%, 67% of 3"
    assert figures.shares({"127.0.0.1:2001": 0}) == "none"


def test_ratios_are_per_round_and_growth_cancels_the_reference(figures: ModuleType) -> None:
    assert figures.ratios([10.0, 30.0], [20.0, 40.0]) == [0.5, 0.75]
    with pytest.raises(ValueError, match="2 rounds against 1"):
        figures.ratios([1.0, 2.0], [1.0])
    # ours x1.5, but the machine was 25% slower in the second phase (the reference fell)
    grown = figures.growth([100.0, 100.0], [150.0, 150.0], [400.0, 400.0], [300.0, 300.0])
    assert grown.ours == pytest.approx(1.5)
    assert grown.reference == pytest.approx(0.75)
    assert grown.normalized == pytest.approx((150 / 300) / (100 / 400))


def test_the_sections_carry_the_measured_figures(figures: ModuleType,
                                                 tmp_path: Path) -> None:
    one = phase(figures, 1, [3000.0, 3200.0, 3100.0], [9000.0, 10000.0, 9500.0],
                [100.0, 110.0, 105.0], [400.0, 440.0, 420.0])
    two = phase(figures, 2, [3600.0, 3700.0, 3650.0], [9100.0, 9900.0, 9600.0],
                [120.0, 125.0, 130.0], [410.0, 430.0, 420.0])
    section = figures.render(INFO, [one, two], CONFIG)
    assert section.startswith(figures.HEADING + "\n")
    assert "Load average at start: 4.10 4.84 3.93, at the end: 5.00 4.90 4.00" in section
    # the ratio column is the median of the per-round ratios: 3100/9500 = 0.33
    assert "| 1 | through the load balancer to the router | 3,100 |" in section
    assert "**0.33**" in section
    assert f"**x{3650 / 3100:.2f}**" in section  # growth through the load balancer
    assert f"**x{125 / 105:.2f}**" in section  # growth of the product route
    assert "Requests per instance through the load balancer with 2 instances: 33%, 67% of 300" \
        in section
    assert section.count("| warm-up |") == 0  # no warm-up recorded in these phases

    sizing = figures.sizing(INFO, [one, two])
    assert sizing.startswith(figures.SIZING_HEADING + "\n")
    assert "carried 3,100 runtime requests/s" in sizing and "105 product-route" in sizing
    assert "bounded by the cores" in sizing
    assert "moved x" not in sizing and "got slower" not in sizing  # steady references, growth
    # 120% of a core for 3,100 req/s: 387 us a request, 2,583 requests/s per core
    assert "a runtime request cost the instances 387 us" in sizing
    assert "about 2,583 requests/s" in sizing
    assert "about 250 charges/s per instance core and 400 per PostgreSQL core" in sizing
    assert ("120% of a core under the proxy load with one instance and 120% with two: the "
            "cores were the limit") in sizing

    # a reference that moved and a route that slowed are said so
    two.nginx = [sample(r * 0.6) for r in (9100.0, 9900.0, 9600.0)]  # median 5,760 / 9,500
    two.route = [payments(figures, r, instances=5.0, postgres=2.5) for r in (80.0, 90.0, 85.0)]
    moved = figures.sizing(INFO, [one, two])
    assert "nginx straight to the origin itself moved x0.61 between the phases" in moved
    assert "Charges got slower with the second instance" in moved
    assert "from 4.00 to 5.00 ms" in moved

    # written through bench/report.py: only that section is replaced
    report = importlib.import_module("report")
    doc = tmp_path / "deploy.md"
    doc.write_text("# Deploying\n\n## TLS\n\ntext\n\n## Sizing\n\nold\n\n## What to watch\n\n"
                   "watch\n")
    report.write_section(figures.SIZING_HEADING, sizing, doc)
    text = doc.read_text()
    assert "old" not in text and "carried 3,100" in text
    assert text.index("## TLS") < text.index("## Sizing") < text.index("## What to watch")
    assert text.endswith("watch\n")
