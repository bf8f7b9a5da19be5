"""The figures of bench/topology_bench.py and the text they become: per-round ratios, the
growth from one instance to two, the nginx access log's split over instances, and the two
sections (docs/BENCHMARKS.md and docs/deploy.md's "Sizing"). No processes here: this is the
part a fast test runs (tests/unit/test_topology_figures.py).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from ledger_bench import Run  # bench/ is on sys.path when run as a script
from proxy_bench import Sample

HEADING = "## Production topology (bench/topology_bench.py)"
SIZING_HEADING = "## Sizing"
CONNECTIONS = 64
# The processes whose CPU is measured (``postgres sys`` is a part of ``postgres``).
OURS = ("edge", "instances", "origin", "wrk", "postgres", "client")


@dataclass
class Payments:
    """One side's run of the payment load, with what the machine did meanwhile."""

    run: Run
    busy: float  # cores busy machine-wide (ours and everyone else's), from /proc/stat

    @property
    def others(self) -> float:
        """Cores busy with work not measured as ours (other people's, mostly)."""
        ours = sum(v for k, v in self.run.cpu.items() if k in OURS) * self.run.rate / 1e3
        return max(0.0, self.busy - ours)


@dataclass
class Phase:
    instances: int
    processes: int  # per instance
    lb: list[Sample] = field(default_factory=list)  # wrk through the load balancer
    nginx: list[Sample] = field(default_factory=list)  # wrk to nginx straight to the origin
    route: list[Payments] = field(default_factory=list)
    pgbench: list[Payments] = field(default_factory=list)
    warm: tuple[Payments, Payments] | None = None  # route, pgbench
    runtime_split: dict[str, int] = field(default_factory=dict)  # instance -> requests
    pay_split: dict[str, int] = field(default_factory=dict)
    pgbench_seconds: int = 0


def others(sample: Sample) -> float:
    """% of a core busy with work not measured as ours during a wrk run."""
    return max(0.0, sample.cpu.get("machine", 0.0)
               - sum(v for k, v in sample.cpu.items() if k in OURS))


def cpu_per_request(sample: Sample, label: str) -> float:
    """Microseconds of ``label``'s CPU per request answered during a wrk run."""
    return 1e4 * sample.cpu.get(label, 0.0) / sample.rps


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def ratios(samples: list[float], base: list[float]) -> list[float]:
    """Each round's figure over its base's in the same round (the pair shares the box's
    conditions, which a shared machine changes between rounds)."""
    if len(samples) != len(base) or not samples:
        raise ValueError(f"{len(samples)} rounds against {len(base)}")
    return [s / b for s, b in zip(samples, base, strict=True)]


def lb_rps(phase: Phase) -> list[float]:
    return [s.rps for s in phase.lb]


def nginx_rps(phase: Phase) -> list[float]:
    return [s.rps for s in phase.nginx]


def route_rate(phase: Phase) -> list[float]:
    return [p.run.rate for p in phase.route]


def pgbench_rate(phase: Phase) -> list[float]:
    return [p.run.rate for p in phase.pgbench]


@dataclass(frozen=True)
class Growth:
    """From one instance to two: the raw medians' quotient of each side, and the quotient of
    the per-round ratios to the reference (meant to cancel what the machine's load did
    between the two phases, since the reference's work does not change with the instances)."""

    ours: float
    reference: float
    normalized: float

    @property
    def steady(self) -> bool:
        """Whether the reference stayed within 10%: else the other work on the machine
        changed between the phases, and it need not have slowed both targets alike."""
        return abs(self.reference - 1) <= 0.10

    def caution(self, reference: str) -> str:
        return "" if self.steady else (
            f" {reference} itself moved x{self.reference:.2f} between the phases: the other "
            "work on the machine changed, and the normalized figure corrects for that only "
            "as far as that work slowed both targets alike, so neither figure is a "
            "measure of the second instance alone.")


def growth(one: list[float], two: list[float], ref_one: list[float],
           ref_two: list[float]) -> Growth:
    return Growth(median(two) / median(one), median(ref_two) / median(ref_one),
                  median(ratios(two, ref_two)) / median(ratios(one, ref_one)))


def split(lines: list[str], instances: list[str]) -> tuple[dict[str, int], dict[str, int]]:
    """Runtime requests and product-route payments per instance (``127.0.0.1:<port>``) in
    the edge's access log (``ops/cluster/topology.py``'s ``edge`` format: status, method,
    host+uri, upstream address, upstream status, time). The reference server block's lines
    name the origin, not an instance, and are not counted."""
    runtime = dict.fromkeys(instances, 0)
    pay = dict.fromkeys(instances, 0)
    for line in lines:
        parts = line.split()
        if len(parts) < 4 or parts[3] not in runtime:
            continue
        if "/api/pay/" in parts[2]:
            pay[parts[3]] += 1
        elif ".apps." in parts[2]:
            runtime[parts[3]] += 1
    return runtime, pay


def shares(counts: dict[str, int]) -> str:
    total = sum(counts.values())
    if not total:
        return "none"
    return ", ".join(f"{n / total:.0%}" for n in counts.values()) + f" of {total:,}"


# --------------------------------------------------------------------------- the section


def _cpu_cell(samples: list[Sample], label: str) -> str:
    values = [s.cpu[label] for s in samples if label in s.cpu]
    return f"{median(values):.0f}%" if values else "-"


def _per_charge(runs: list[Payments], label: str) -> str:
    values = [p.run.cpu[label] for p in runs if label in p.run.cpu]
    return f"{median(values):.2f}" if values else "-"


def _fmt_ratios(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def render(info: dict[str, str], phases: list[Phase], config: dict[str, str]) -> str:
    """The docs/BENCHMARKS.md section. ``phases`` are the one- and two-instance runs."""
    one, two = phases
    proxy = growth(lb_rps(one), lb_rps(two), nginx_rps(one), nginx_rps(two))
    pay = growth(route_rate(one), route_rate(two), pgbench_rate(one), pgbench_rate(two))
    rounds = len(one.lb)
    lines = [
        HEADING, "",
        f"Run {info['date']} on `{info['uname -m']}`, nproc {info['nproc']}, Python "
        f"{info['python']}, {info['nginx']}, {info['wrk']}, {info['postgres']}, "
        f"{info['pgbench']}; {info['libraries']}. Load average at start: "
        f"{info['load at start']}, at the end: {info['load at end']} (a machine shared with "
        "other work: compare the ratios, each measured against its reference in the same "
        "round, not the absolute figures).", "",
        f"The topology of `ops/cluster` (`Cluster`, as `scripts/cluster.sh` runs it) started "
        f"twice in this run, with {one.instances} and then {two.instances} `svc-server serve` "
        f"instances of `SVCSRV_PROCESSES={one.processes}` each: nginx terminating TLS in front "
        f"(2 workers, TLS 1.2/1.3, access log on, `keepalive 64` to the instances, the "
        "upstream list following `Options.instances`), one PostgreSQL, Redis, a Hardhat node. "
        f"{config['postgres']} {config['workers']}", "",
        "### Runtime proxy through the load balancer, against nginx straight to the origin", "",
        f"Load: `wrk -t1 -c{CONNECTIONS} -d{config['duration']}s --latency` over TLS "
        "(keep-alive: a handshake per connection, not per request), after a 2 s warm-up per "
        f"target; the two targets interleaved (order alternating) for {rounds} "
        f"round{'' if rounds == 1 else 's'}. The origin is nginx (1 worker) answering a "
        "1,024-byte body; app `bench`'s runtime origin, cached in every router process after "
        f"the warm-up. {config['reference']} Every target answered 200 with exactly the "
        "1,024-byte body before and after each load.", "",
        "| Instances | Target | Req/s | p50 | p99 | Req/s vs nginx | p99 vs nginx |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for phase in phases:
        lb_r = ratios(lb_rps(phase), nginx_rps(phase))
        p99_r = ratios([s.p99_ms for s in phase.lb], [s.p99_ms for s in phase.nginx])
        for name, samples, shown, p in (
                ("through the load balancer to the router", phase.lb, f"**{median(lb_r):.2f}**",
                 median(p99_r)),
                ("nginx straight to the origin (same nginx, same TLS)", phase.nginx, "1.00",
                 1.0)):
            lines.append(
                f"| {phase.instances} | {name} | {median([s.rps for s in samples]):,.0f} | "
                f"{median([s.p50_ms for s in samples]):.2f} ms | "
                f"{median([s.p99_ms for s in samples]):.2f} ms | {shown} | {p:.2f} |")
    lines += [
        "",
        f"Growth from 1 to 2 instances: through the load balancer **x{proxy.ours:.2f}**, nginx "
        f"straight to the origin x{proxy.reference:.2f} (the same work in both phases: what "
        f"the machine's load did between them), the ratio to nginx x{proxy.normalized:.2f}. "
        f"Per-round ratios to nginx: 1 instance {_fmt_ratios(ratios(lb_rps(one), nginx_rps(one)))}"
        f"; 2 instances {_fmt_ratios(ratios(lb_rps(two), nginx_rps(two)))}. Requests per "
        f"instance through the load balancer with 2 instances: {shares(two.runtime_split)}."
        + proxy.caution("nginx straight to the origin"),
        "",
        "CPU while wrk ran (median of rounds, % of one core, from /proc; the machine has "
        f"{info['nproc']} cores, so 200% is all of it; \"machine\" is every process on it, "
        "other people's work included):", "",
        "| Instances | Target | machine | nginx (edge) | instances | origin | wrk | other work |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for phase in phases:
        for name, samples in (("load balancer", phase.lb), ("nginx -> origin", phase.nginx)):
            lines.append(f"| {phase.instances} | {name} | {_cpu_cell(samples, 'machine')} | "
                         f"{_cpu_cell(samples, 'edge')} | {_cpu_cell(samples, 'instances')} | "
                         f"{_cpu_cell(samples, 'origin')} | {_cpu_cell(samples, 'wrk')} | "
                         f"{median([others(s) for s in samples]):.0f}% |")
    lines += [
        "", "### Product-route charges through the load balancer, against pgbench", "",
        f"Load: {config['charges']} per round through `POST https://api.localhost/api/pay/bench/"
        f"unlock-level` (via the edge) with {config['concurrency']} concurrent keep-alive "
        f"requests, each with its own payment code minted beforehand "
        "(`payments.ledger.codes.issue`, as bench/ledger_bench.py does) and its own "
        f"idempotency key, spread over {config['wallets']} paying wallets; against `pgbench "
        f"-M prepared -c {config['concurrency']} -j 2` running `bench/ledger/charge.sql` (the "
        "same statements in one transaction per charge) on a second database of the same "
        "PostgreSQL, for as long as the route's warm-up predicts its round takes; "
        f"interleaved, order alternating, {rounds} round{'' if rounds == 1 else 's'} after "
        "a warm-up of both. Every route call answered 201 and each run left exactly one new "
        "charge, delivery, webhook event, webhook attempt, idempotency record and consumed "
        "payment code per charge (rows counted).", "",
        "| Instances | Side | Charges/s | p50 | p99 | vs pgbench |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for phase in phases:
        r = median(ratios(route_rate(phase), pgbench_rate(phase)))
        for name, runs, value in (("product route through the load balancer", phase.route,
                                   f"**{r:.2f}**"),
                                  ("pgbench, same SQL, same PostgreSQL", phase.pgbench, "1.00")):
            lines.append(
                f"| {phase.instances} | {name} | {median([p.run.rate for p in runs]):,.0f} | "
                f"{median([p.run.p50_ms for p in runs]):.1f} ms | "
                f"{median([p.run.p99_ms for p in runs]):.1f} ms | {value} |")
    lines += [
        "",
        f"Growth from 1 to 2 instances: product route **x{pay.ours:.2f}**, pgbench "
        f"x{pay.reference:.2f}, the ratio to pgbench x{pay.normalized:.2f}. Per-round ratios "
        f"to pgbench: 1 instance {_fmt_ratios(ratios(route_rate(one), pgbench_rate(one)))}; "
        f"2 instances {_fmt_ratios(ratios(route_rate(two), pgbench_rate(two)))}. Payments "
        f"per instance with 2 instances: {shares(two.pay_split)}."
        + pay.caution("pgbench"), "",
        "CPU per charge (median of rounds, ms, from /proc and getrusage; \"busy\" = cores busy "
        "machine-wide during the run, anyone's work):", "",
        "| Instances | Side | busy | instances | PostgreSQL | nginx (edge) | client | "
        "other work (cores) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for phase in phases:
        for name, runs in (("product route", phase.route), ("pgbench", phase.pgbench)):
            busy = median([p.busy for p in runs])
            lines.append(f"| {phase.instances} | {name} | {busy:.2f} | "
                         f"{_per_charge(runs, 'instances')} | {_per_charge(runs, 'postgres')} | "
                         f"{_per_charge(runs, 'edge')} | {_per_charge(runs, 'client')} | "
                         f"{median([p.others for p in runs]):.2f} |")
    lines += [
        "", "Raw rounds:", "",
        "| Instances | Round | Target | Req/s or charges/s | p50 | p99 | errors / checks |",
        "|---:|---:|---|---:|---:|---:|---|",
    ]
    for phase in phases:
        for i, (lb, ng) in enumerate(zip(phase.lb, phase.nginx, strict=True)):
            for name, s in (("load balancer", lb), ("nginx -> origin", ng)):
                lines.append(f"| {phase.instances} | {i + 1} | {name} | {s.rps:,.0f} | "
                             f"{s.p50_ms:.2f} ms | {s.p99_ms:.2f} ms | {s.errors or 'none'} |")
        pairs = list(zip(phase.route, phase.pgbench, strict=True))
        if phase.warm is not None:
            pairs.insert(0, phase.warm)
        for i, (route, pgb) in enumerate(pairs):
            label = "warm-up" if phase.warm is not None and i == 0 else str(
                i + (0 if phase.warm is not None else 1))
            for name, done in (("product route", route), ("pgbench", pgb)):
                lines.append(f"| {phase.instances} | {label} | {name} | {done.run.rate:,.0f} "
                             f"| {done.run.p50_ms:.1f} ms | {done.run.p99_ms:.1f} ms | "
                             f"{done.run.charges:,} charges in {done.run.seconds:.1f} s, rows "
                             "checked |")
    lines += ["", "Configuration:", "", config["details"]]
    return "\n".join(lines) + "\n"


def sizing(info: dict[str, str], phases: list[Phase]) -> str:
    """docs/deploy.md's "Sizing": what the figures above say to an operator."""
    one, two = phases
    proxy = growth(lb_rps(one), lb_rps(two), nginx_rps(one), nginx_rps(two))
    pay = growth(route_rate(one), route_rate(two), pgbench_rate(one), pgbench_rate(two))
    lb_ratio = median(ratios(lb_rps(one), nginx_rps(one)))
    pay_ratio = median(ratios(route_rate(one), pgbench_rate(one)))
    busy_proxy = median([s.cpu.get("machine", 0.0) for s in one.lb]) / 100
    other_proxy = median([others(s) for s in one.lb]) / 100
    busy_pay = median([p.busy for p in one.route])
    other_pay = median([p.others for p in one.route])
    inst_cpu = median([s.cpu.get("instances", 0.0) for s in one.lb])
    edge_cpu = median([s.cpu.get("edge", 0.0) for s in one.lb])
    pg_ms = median([p.run.cpu.get("postgres", 0.0) for p in one.route])
    app_ms = median([p.run.cpu.get("instances", 0.0) for p in one.route])
    inst_two = median([s.cpu.get("instances", 0.0) for s in two.lb])
    request_us = median([cpu_per_request(s, "instances") for s in one.lb])
    edge_us = median([cpu_per_request(s, "edge") for s in one.lb])
    share = (
        f"The instances' processes had {inst_cpu:.0f}% of a core under the proxy load with "
        f"one instance and {inst_two:.0f}% with two: on a machine with other work, more "
        "processes win a larger share of the cores from that work under Linux's fair "
        "scheduler, which is where that part of the growth comes from, not capacity a second "
        "instance brings." if inst_two > 1.1 * inst_cpu else
        f"The instances' processes had {inst_cpu:.0f}% of a core under the proxy load with "
        f"one instance and {inst_two:.0f}% with two: the cores were the limit.")
    app_two = median([p.run.cpu.get("instances", 0.0) for p in two.route])
    slower = "" if pay.ours >= 0.95 else (
        " Charges got slower with the second instance: its processes took CPU that "
        "PostgreSQL and the first instance needed, and the instances' CPU per charge went "
        f"from {app_ms:.2f} to {app_two:.2f} ms (more processes switching on the same cores).")
    nproc = info["nproc"]
    return "\n".join([
        SIZING_HEADING, "",
        f"Measured by `bench/topology_bench.py` on one {nproc}-core machine shared with other "
        f"work (load average {info['load at start']} at the start; run {info['date']}; every "
        "figure and the method in [BENCHMARKS.md](BENCHMARKS.md), \"Production topology\"). "
        "Everything ran on those cores at once: nginx, the instances, PostgreSQL, Redis, "
        "Hardhat, the origin and the load generators.", "",
        f"- **One instance of {one.processes} processes** carried "
        f"{median(lb_rps(one)):,.0f} runtime requests/s through the TLS edge "
        f"({lb_ratio:.0%} of what the same nginx did proxying straight to the origin) and "
        f"{median(route_rate(one)):,.0f} product-route charges/s ({pay_ratio:.0%} of pgbench "
        "running the same statements on the same PostgreSQL).",
        f"- **A second instance** changed that by x{proxy.ours:.2f} for runtime requests and "
        f"x{pay.ours:.2f} for charges (x{proxy.normalized:.2f} and x{pay.normalized:.2f} "
        "against their references, meant to cancel the machine's load changing between "
        "the two phases)." + proxy.caution("nginx straight to the origin")
        + pay.caution("pgbench") + slower,
        f"- **The bottleneck here is the {nproc} cores.** While wrk ran through one instance "
        f"the machine was {busy_proxy:.1f} of {nproc} cores busy ({other_proxy:.1f} of them "
        f"with other people's work): the instance's processes took {inst_cpu:.0f}% of a "
        f"core, nginx's TLS and proxying {edge_cpu:.0f}%, the rest went to wrk and the "
        f"origin. A charge cost {app_ms:.2f} ms of the instance's CPU and {pg_ms:.2f} ms of "
        f"PostgreSQL's, with {busy_pay:.1f} cores busy ({other_pay:.1f} with other work). "
        f"Two instances of {one.processes} processes on {nproc} cores are "
        f"{2 * one.processes} processes sharing the CPU that one instance already had "
        "(with nginx, PostgreSQL and the load generators): a second instance adds "
        "processes, not cores, so the growth measured here is bounded by the cores. What "
        "it does show: nginx spread the runtime requests over the two instances "
        f"{shares(two.runtime_split)} and the payments {shares(two.pay_split)}. {share}",
        "- **What it predicts.** The instances' work is CPU, and CPU per unit of work is "
        f"what carries over to other hardware: a runtime request cost the instances "
        f"{request_us:.0f} us and nginx {edge_us:.0f} us (TLS included), so one core of "
        f"instance processes serves about {1e6 / request_us:,.0f} requests/s; a charge cost "
        f"the instances {app_ms:.2f} ms and PostgreSQL {pg_ms:.2f} ms, so about "
        f"{1e3 / app_ms:,.0f} charges/s per instance core and {1e3 / pg_ms:,.0f} per "
        "PostgreSQL core (on this contended machine CPU per unit of work runs higher than "
        "on a quiet one; bench/proxy_bench.py and bench/ledger_bench.py have quieter "
        "figures). Give each instance cores of its own (`SVCSRV_PROCESSES` = its cores) "
        "and capacity grows with instances, each adding about its cores times those "
        "rates, until the next shared part: for charges that is PostgreSQL (plus a "
        "commit's flush with fsync on), to be sized with pgbench and "
        "`bench/ledger/charge.sql` on the real hardware. Keep one instance more than the "
        "peak needs, for rolling restarts and for the load a lost instance leaves to the "
        "others.",
        "",
    ])
