"""What a new client connection, and a new origin connection, cost the proxy beside what
its request costs: the router against nginx, on the same bed as bench/proxy_cases.py.

    .venv/bin/python bench/connection_cpu.py [--rounds 3] [--duration 6] [--dry-run]

Each round loads each proxy three times with wrk (1 thread, 32 connections, the ``fast``
app's 1 KB answer): on keep-alive connections; with ``Connection: close`` on every
request, so that each request comes on a client connection of its own (accepted, set up,
closed by the proxy after its answer); and on keep-alive client connections for the
origin's ``/close``, which the origin answers and then closes, so that each request
needs a new origin connection. The proxy's CPU (all its processes, from /proc) per
request in each run; the difference of either of the last two from the first is what a
client connection, or an origin connection, costs beyond its request. Both are what a
burst of new clients waits for (the start of case 4's run: 2,000 connections at once,
each first request on a new origin connection) and what clients, or origins, that do not
keep connections open pay on every request. Rounds interleave the two proxies; the
ratios are the router's figure over nginx's in the same round (this machine is shared
and noisy). Writes its section of docs/BENCHMARKS.md unless ``--dry-run``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from dataclasses import dataclass

from case_targets import Target, bed, raise_open_files, start_nginx_proxy, start_router
from proxy_bench import WRK, _family, _family_split, fetch, machine, parse_wrk
from report import write_section

from ops.cluster.processes import Processes

HEADING = "## Router: CPU per new connection, client and origin (bench/connection_cpu.py)"
# Rendered under the figures whatever run wrote them; update it with the code it describes.
WHERE = (
    "Where the router's goes (2026-11-27, one router process under each load: `perf` "
    "sampling, and every Python call counted): against a keep-alive request, a close "
    "request adds about 58 us in the kernel (accept, close and FIN, the epoll changes, and "
    "about 28 us of waking the client and the origin: `_raw_spin_unlock_irqrestore` under "
    "`sock_def_readable`, where this virtual machine's interrupt to an idle CPU is paid; "
    "both sleep more at the close load's lower rate), about 24 us in libpython (the C API "
    "that uvloop's transport setup and teardown and our compiled code call: allocation, "
    "attribute lookups, the collector), about 8 us in uvloop itself, and 11 Python calls "
    "(uvicorn's protocol factory, its `FlowControl` and `asyncio.Event`, uvloop's "
    "`WeakValueDictionary` of transports). Our protocol's own setup, timed alone on "
    "in-memory transports, is about 8 us. Until 2026-11-27 it took the peer and local "
    "addresses through uvicorn's helpers, which ask uvloop for the socket: a `PseudoSocket`, "
    "then per call a `socket.socket` that asks the kernel again (5 syscalls, 8 us timed on "
    "real uvloop transports); it now reads the addresses uvloop saved at accept (2 us): "
    "112 to 117 us per close request on one process instead of 126 to 128, 3 rounds "
    "alternating with the tree before. The keep-alive timer (0.9 us to arm and cancel on "
    "uvloop), the flow control (0.5 us) and the parser (1 us) are left as they are. A new "
    "origin connection (one process, an origin closing each connection, 2026-11-27): about "
    "27 us of user CPU (a task for the connect, `asyncio.timeout`'s ten Python calls, "
    "uvloop's `create_connection` coroutine, the answer parser) and 53 us in the kernel "
    "(the socket, the connect, whose handshake on loopback is processed in the caller's "
    "system call, the close). The connect timeout is now the upstream client's sweep, "
    "which already ran for read timeouts, instead of an `asyncio.timeout` per connect: "
    "a new origin connection cost the router 56 to 64 us beyond its request in 6 rounds "
    "since (2026-11-27, 12:15 to 12:27 UTC), 63 to 70 us in 7 rounds before (the "
    "timeout alone, timed on uvloop: 8 to 10 us). System "
    "calls per request (`strace -c` on all the proxy's "
    "processes, 32 connections, 2026-11-27): on keep-alive connections the router makes "
    "4.2 (2 reads, 2 writes), nginx 5.2; with a new client connection for each, 13.2 "
    "against 10.1; with a new origin connection for each, 16.1 against 11.2. The extra "
    "calls are cheap ones: `TCP_NODELAY` and the two addresses uvloop reads for each "
    "connection, a `getpid` from each asyncio lookup of the running loop (3 per new "
    "origin connection when counted: the task, the timeout), and the `io_uring_enter` "
    "through which "
    "libuv 1.52 submits its epoll changes. The costly calls (accept, socket, connect, "
    "close, the reads and writes) are the same; nginx even reads once more per origin "
    "connection. The router's larger kernel time per connection is the same calls "
    "costing more (the wake-ups above), not more asked of the kernel.")
CONNECTIONS = 32
BURST = 2000  # case 4's wrk connections
MODES = ("keep-alive", "close", "origin-close")


@dataclass
class Run:
    target: str
    mode: str  # "keep-alive", "close" or "origin-close"
    rps: float
    cpu_us: float  # the proxy's CPU per request
    errors: str


def load(target: Target, mode: str, seconds: int) -> Run:
    close = ["-H", "Connection: close"] if mode == "close" else []
    path = "/close" if mode == "origin-close" else "/"
    argv = [WRK, "-t1", f"-c{CONNECTIONS}", "--latency", "-H", f"Host: {target.host('fast')}",
            *close, f"http://127.0.0.1:{target.port}{path}"]
    subprocess.run([*argv, "-d2s"], capture_output=True, check=False)  # warm-up
    pids = _family(target.proc.pid)
    user, kernel = _family_split(pids)
    started = time.monotonic()
    done = subprocess.run([*argv, f"-d{seconds}s"], capture_output=True, text=True,
                          timeout=seconds + 30, check=False)
    elapsed = time.monotonic() - started
    user2, kernel2 = _family_split(pids)
    sample = parse_wrk(done.stdout)
    cpu_seconds = (user2 - user + kernel2 - kernel) / os.sysconf("SC_CLK_TCK")
    status, _ = fetch(target.port, target.host("fast"))
    if status != 200:
        raise RuntimeError(f"{target.label} answered {status} after the load")
    # wrk counts the connections the server closes as read errors; only others matter.
    errors = sample.errors if mode != "close" else ""
    return Run(target.key, mode, sample.rps, 1e6 * cpu_seconds / (sample.rps * elapsed),
               errors)


def per_connection(runs: list[Run], target: str, mode: str = "close") -> float:
    """CPU per connection beyond its request: a client connection (``close``) or an
    origin connection (``origin-close``)."""
    by_mode = {r.mode: r for r in runs if r.target == target}
    return by_mode[mode].cpu_us - by_mode["keep-alive"].cpu_us


def burst_ms(runs: list[Run], target: str, processes: int) -> float:
    """Half the time ``processes`` take to serve a burst of ``BURST`` requests, each on a
    new client connection and a new origin connection, one after another at these costs:
    what the burst adds to a run's p99 when it is most of the run's slowest 1% (case 4)."""
    request = next(r.cpu_us for r in runs if r.target == target and r.mode == "keep-alive")
    each = request + per_connection(runs, target) + per_connection(runs, target,
                                                                   "origin-close")
    return BURST * each / processes / 2 / 1000


def render(rounds: list[list[Run]], info: dict[str, str], processes: int) -> str:
    lines = [HEADING, ""]
    lines.append("Run " + info["date"] + " on `" + info["uname -m"] + "`, nproc "
                 + info["nproc"] + ", Python " + info["python"] + ", " + info["nginx -v"]
                 + ", " + info["wrk"] + "; " + info["libraries"]
                 + ". Load average at start: " + info["load average at start"] + ".")
    lines += ["", __doc__.split("\n\n")[2].replace("\n", " ").strip()
              .replace("Writes its section of docs/BENCHMARKS.md unless ``--dry-run``.", "")
              .replace("``", "`")
              .strip(), ""]
    for mode, what in (("close", "client"), ("origin-close", "origin")):
        ratios = [per_connection(r, "router", mode) / per_connection(r, "nginx", mode)
                  for r in rounds]
        router = statistics.median(per_connection(r, "router", mode) for r in rounds)
        nginx = statistics.median(per_connection(r, "nginx", mode) for r in rounds)
        lines.append(f"- a new {what} connection costs the router **{router:.0f} us** of CPU "
                     f"beyond its request, nginx {nginx:.0f} us: "
                     f"**x{statistics.median(ratios):.2f}** (median over rounds of the ratio "
                     "in each round)")
    router_burst = statistics.median(burst_ms(r, "router", processes) for r in rounds)
    nginx_burst = statistics.median(burst_ms(r, "nginx", processes) for r in rounds)
    lines += [f"- a burst of {BURST:,} requests at once, each on a new client connection and "
              f"a new origin connection, served first come first served by {processes} "
              "processes at these costs (keep-alive request + client connection + origin "
              "connection): half of it, what it adds to the p99 of a run where it is most "
              f"of the slowest 1% (case 4), is about **{router_burst:.0f} ms** for the "
              f"router and {nginx_burst:.0f} ms for nginx. An estimate from CPU alone: "
              "case 4 measures the real thing, where part of the kernel's work runs on the "
              "other core and busy peers need fewer wake-ups. A 10 ms target there needs "
              f"about {10_000 * 2 * processes / BURST:.0f} us a request.", ""]
    lines += ["| Round | Proxy | keep-alive req/s | CPU/req | close req/s | CPU/req "
              "| per client connection | origin-close req/s | CPU/req "
              "| per origin connection | burst, half |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for number, runs in enumerate(rounds, 1):
        for target in ("nginx", "router"):
            mine = {r.mode: r for r in runs if r.target == target}
            lines.append(
                f"| {number} | {target} | {mine['keep-alive'].rps:,.0f} "
                f"| {mine['keep-alive'].cpu_us:.0f} us | {mine['close'].rps:,.0f} "
                f"| {mine['close'].cpu_us:.0f} us | {per_connection(runs, target):.0f} us "
                f"| {mine['origin-close'].rps:,.0f} | {mine['origin-close'].cpu_us:.0f} us "
                f"| {per_connection(runs, target, 'origin-close'):.0f} us "
                f"| {burst_ms(runs, target, processes):.0f} ms |")
    lines += ["", WHERE]
    errors = [f"{r.target} {r.mode}: {r.errors}" for runs in rounds for r in runs if r.errors]
    if errors:
        lines += ["", "Errors reported by wrk: " + "; ".join(errors)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=6)
    parser.add_argument("--dry-run", action="store_true", help="print only")
    options = parser.parse_args()
    raise_open_files()
    info = machine()
    rounds: list[list[Run]] = []
    processes = os.cpu_count() or 1
    with bed(processes) as place:
        for number in range(options.rounds):
            runs: list[Run] = []
            for start in (start_nginx_proxy, start_router):
                procs = Processes()
                try:
                    target = start(place, procs)
                    for mode in MODES:
                        run = load(target, mode, options.duration)
                        runs.append(run)
                        print(f"round {number + 1} {run.target:6} {mode:12} "
                              f"{run.rps:9,.0f} req/s {run.cpu_us:6.1f} us/req", flush=True)
                finally:
                    procs.stop_all()
            rounds.append(runs)
    section = render(rounds, info, processes)
    print(section)
    if not options.dry_run:
        write_section(HEADING, section)


if __name__ == "__main__":
    main()
