"""How bench/proxy_cases.py loads a target and reads what it cost: wrk, the asyncio
clients of bench/case_clients.py, CPU from /proc."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from case_targets import Bed, Target, start_nginx_proxy, start_router
from proxy_bench import ROOT, WRK, Sample, _family, _family_split, parse_wrk

from ops.cluster.processes import Processes

CLIENTS = str(Path(__file__).with_name("case_clients.py"))
WARMUP = 2
T = TypeVar("T")


def run_line(info: dict[str, str]) -> str:
    return (f"Run {info['date']} on `{info['uname -m']}`, nproc {info['nproc']}, Python "
            f"{info['python']}, {info['nginx -v']}, {info['wrk']}; {info['libraries']}. Load "
            f"average at start: {info['load average at start']} (a shared machine: compare the "
            "ratios, not the absolute figures).")


def wrk(argv: list[str], seconds: float) -> Sample:
    done = subprocess.run([WRK, *argv], capture_output=True, text=True,
                          timeout=seconds + 60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr}{done.stdout}")
    return parse_wrk(done.stdout)


def with_cpu(watch: dict[str, int], run: Callable[[], T]) -> tuple[T, dict[str, float]]:
    """``run()``'s result and the CPU each watched process family used meanwhile, in % of
    one core (from /proc, user + kernel)."""
    families = {label: _family(pid) for label, pid in watch.items()}
    before = {label: sum(_family_split(pids)) for label, pids in families.items()}
    start = time.monotonic()
    result = run()
    elapsed = time.monotonic() - start
    hz = os.sysconf("SC_CLK_TCK")
    return result, {label: 100.0 * (sum(_family_split(pids)) - before[label]) / hz / elapsed
                    for label, pids in families.items()}


def client(kind: str, port: int, host: str, *args: str) -> list[str]:
    return [sys.executable, CLIENTS, kind, "--port", str(port), "--host", host, *args]


def run_client(argv: list[str], timeout: float) -> dict[str, float]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              [str(ROOT), os.environ.get("PYTHONPATH", "")])})
    if done.returncode != 0:
        raise RuntimeError(f"client failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


class Background(threading.Thread):
    """A blocking call run beside the main load (case 4's fast app)."""

    def __init__(self, call: Callable[[], dict[str, float]]) -> None:
        super().__init__(daemon=True)
        self._call = call
        self.result: dict[str, float] = {}
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self._call()
        except BaseException as exc:  # handed to the main thread by value()
            self.error = exc

    def value(self) -> dict[str, float]:
        self.join()
        if self.error is not None:
            raise self.error
        return self.result


@contextlib.contextmanager
def proxies(place: Bed) -> Iterator[list[Target]]:
    """nginx and the router, started for one case and stopped after it."""
    procs = Processes()
    try:
        yield [start_nginx_proxy(place, procs), start_router(place, procs)]
    finally:
        procs.stop_all()
