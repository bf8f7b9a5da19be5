"""Where one router process spends its CPU under a case of bench/proxy_cases.py:

    .venv/bin/python bench/case_profile.py {post,slow,ws} [--duration 6]
    .venv/bin/python bench/case_profile.py accept {router,nginx}
    .venv/bin/python bench/case_profile.py arrivals [--rounds 2]

Starts the case's origins (bench/case_targets.py) and one router process under cProfile
(bench/proxy_bench.py's ``--serve router --profile-out``: CPU time, enabled only while the
load runs), loads it as the case does with half the connections (one process of the two),
and prints the measured rate, the profiled time by area and the top functions.

``accept`` runs case 4's load (2,000 connections opened at once on the slow app) against
the router or nginx as the case starts them, and prints the length of the proxy's accept
queues (``ss``: connections the kernel completed that the server has not accepted yet)
every 0.25 s for the first 3 s.

``arrivals`` runs the start of case 4's load (its warm-up, a second's pause, then 4 s)
on the slow origin directly, through nginx and through the router, in interleaved
rounds, with the origin logging when each request reaches it, and prints when its 1st,
100th, 500th, 1,000th and 2,000th request of the run arrived, counted from wrk's start:
how fast each proxy passes on the burst of 2,000 first requests, each on a new client
connection and a new origin connection. Prints only; nothing is written to docs/.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import pstats
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from case_measure import WARMUP, client, wrk
from case_runs import SLOW_CONNECTIONS, lua_script, post_body, slow_load
from case_targets import (
    Bed,
    bed,
    extra_router_env,
    raise_open_files,
    start_nginx_proxy,
    start_router,
    wait_port,
)
from proxy_bench import ROOT, WRK, area_of, router_env

from ops.cluster.processes import Processes, free_port


def load(kind: str, port: int, host: str, tmp: Path, seconds: int) -> list[str]:
    if kind == "ws":
        return client("ws", port, host, "--connections", "500", "--duration", str(seconds))
    if kind == "post":
        (tmp / "post.lua").write_text(lua_script(post_body()))
        return [WRK, "-t1", "-c64", f"-d{seconds}s", "--latency", "-s", str(tmp / "post.lua"),
                "-H", f"Host: {host}", f"http://127.0.0.1:{port}/post"]
    return [WRK, "-t1", "-c1000", f"-d{seconds}s", "--latency", "--timeout", "10s", "-H",
            f"Host: {host}", f"http://127.0.0.1:{port}/"]


def profile(kind: str, seconds: int) -> None:
    raise_open_files()
    with bed(1) as place:
        stats_file = place.tmp / "router.prof"
        origin = {"slow": place.slow_port, "ws": place.ws_port}.get(kind, place.upstream_port)
        procs = Processes()
        try:
            port = free_port()
            env = {**place.python_env, **router_env(port, place.tmp / "router.db",
                                                    place.redis_url, 1), **extra_router_env()}
            proc = procs.start("router", [
                sys.executable, str(ROOT / "bench" / "proxy_bench.py"), "--serve", "router",
                "--upstream", f"http://127.0.0.1:{origin}", "--profile-out", str(stats_file)],
                place.tmp / "router.log", cwd=str(ROOT), env=env)
            for _ in range(600):
                with contextlib.suppress(OSError):
                    socket.create_connection(("127.0.0.1", port), 1).close()
                    break
                time.sleep(0.1)
            host = f"bench.apps.localhost:{port}"  # proxy_bench seeds the app `bench`
            subprocess.run(load(kind, port, host, place.tmp, 2), capture_output=True,
                           check=False, env=place.python_env)  # warm-up
            os.kill(proc.pid, signal.SIGUSR1)
            done = subprocess.run(load(kind, port, host, place.tmp, seconds),
                                  capture_output=True, text=True, check=False,
                                  env=place.python_env)
            os.kill(proc.pid, signal.SIGUSR2)
            for _ in range(100):
                if stats_file.exists():
                    break
                time.sleep(0.1)
            time.sleep(0.5)
            print(done.stdout[-700:])
            report(stats_file)
        finally:
            procs.stop_all()


def accept_queues(target_kind: str) -> None:
    raise_open_files()
    with bed(os.cpu_count() or 1) as place:
        procs = Processes()
        try:
            start = start_router if target_kind == "router" else start_nginx_proxy
            target = start(place, procs)
            argv = [WRK, *slow_load(target.port, target.host("slow"))]
            subprocess.run([*argv, f"-d{WARMUP}s"], capture_output=True, check=False)
            with subprocess.Popen([*argv, "-d8s"], stdout=subprocess.PIPE, text=True) as run:
                began = time.monotonic()
                while time.monotonic() - began < 3:
                    listed = subprocess.run(["ss", "-ltnH", f"sport = :{target.port}"],
                                            capture_output=True, text=True, check=False)
                    queues = [int(line.split()[1]) for line in listed.stdout.splitlines()
                              if line.strip()]
                    print(f"{time.monotonic() - began:4.2f} s  accept queues {queues}",
                          flush=True)
                    time.sleep(0.25)
                print(run.communicate()[0][-500:])
        finally:
            procs.stop_all()


ARRIVAL_MARKS = (1, 100, 500, 1000, SLOW_CONNECTIONS)


def arrivals(rounds: int) -> None:
    raise_open_files()
    with bed(os.cpu_count() or 1) as place:
        for number in range(1, rounds + 1):
            for kind in ("origin", "nginx", "router"):
                procs = Processes()
                try:
                    marks, p99 = burst_arrivals(place, procs, kind)
                finally:
                    procs.stop_all()
                shown = "  ".join(f"{n}: {ms:5.1f}" for n, ms in zip(ARRIVAL_MARKS, marks,
                                                                      strict=True))
                print(f"round {number} {kind:6s}  ms from wrk's start  {shown}   "
                      f"wrk p99 {p99:.1f} ms", flush=True)


def burst_arrivals(place: Bed, procs: Processes, kind: str) -> tuple[list[float], float]:
    """(when the ARRIVAL_MARKS-th request of the run reached the origin, in ms after wrk
    started; wrk's p99) for case 4's load on ``kind``, with an origin of its own."""
    port = free_port()
    log = place.tmp / f"arrivals-{port}.txt"
    origin = procs.start("logging slow origin", [
        sys.executable, str(Path(__file__).with_name("case_origins.py")), "slow", "--port",
        str(port), "--arrivals", str(log)], place.tmp / f"arrivals-{port}.log",
        env=place.python_env)
    wait_port(origin, port)
    logged = dataclasses.replace(place, slow_port=port)
    if kind == "origin":
        target_port, host = port, f"slow.apps.localhost:{port}"
    else:
        target = (start_router if kind == "router" else start_nginx_proxy)(logged, procs)
        target_port, host = target.port, target.host("slow")
    argv = slow_load(target_port, host)
    wrk([f"-d{WARMUP}s", *argv], WARMUP)
    time.sleep(1.0)  # the warm-up's clients gone, and their origin connections
    began = time.monotonic()
    sample = wrk(["-d4s", *argv], 4)
    origin.popen.send_signal(signal.SIGTERM)
    origin.popen.wait(timeout=30)
    times = sorted(float(line) - began for line in log.read_text().split()
                   if float(line) >= began)
    marks = [1000 * times[n - 1] if len(times) >= n else float("nan") for n in ARRIVAL_MARKS]
    return marks, sample.p99_ms


def report(stats_file: Path) -> None:
    stats = pstats.Stats(str(stats_file))
    raw = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for (_, _, tt, _, _) in raw.values())
    areas: dict[str, float] = {}
    for (filename, _, func), (_, _, tt, _, _) in raw.items():
        areas[area_of(filename, func)] = areas.get(area_of(filename, func), 0.0) + tt
    print(f"own time by area (profiled total {total:.2f} s):")
    for key, tt in sorted(areas.items(), key=lambda kv: -kv[1]):
        print(f"  {tt / total:6.1%}  {tt:7.2f} s  {key}")
    stats.sort_stats("tottime").print_stats(20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("post", "slow", "ws", "accept", "arrivals"))
    parser.add_argument("target", nargs="?", choices=("router", "nginx"), default="router",
                        help="for accept: whose accept queues")
    parser.add_argument("--duration", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2, help="for arrivals")
    options = parser.parse_args()
    if options.kind == "accept":
        accept_queues(options.target)
    elif options.kind == "arrivals":
        arrivals(options.rounds)
    else:
        profile(options.kind, options.duration)


if __name__ == "__main__":
    main()
