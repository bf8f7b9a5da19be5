"""Child processes started by a launcher, each in its own session and stopped by its pid.

Its own session means a kill of the group reaches what that child started (a server's
worker processes, nginx's workers) and nothing of ours.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from payments.digits import parse_digits

# Below Linux's ephemeral range (32768-60999 by default): a port handed out here and bound
# a moment later by a server cannot meanwhile become the source port of some outgoing
# connection, which an ephemeral port (bind to 0) can under connection churn.
_PORTS = (20000, 32000)
# Launchers running side by side (the test suite's workers) each take their own share of
# the range, "low-high", so that two never hand out the same port in the moment between
# the check here and the server's bind (servers that listen with SO_REUSEPORT would even
# share it). Inherited by child processes.
PORTS_ENV = "SVC_FREE_PORTS"


def port_range() -> tuple[int, int]:
    raw = os.environ.get(PORTS_ENV, "")
    low_text, _, high_text = raw.partition("-")
    low, high = parse_digits(low_text, 5), parse_digits(high_text, 5)
    if low is not None and high is not None and 1024 <= low < high <= 65536:
        return low, high
    return _PORTS


# Ports this process handed out: never twice. Free when checked is not free a moment later
# if another call returned the same port before its server bound it (a cluster asks for a
# dozen at once; a clean-clone run once saw two of its servers given the same one).
_given: set[int] = set()


def free_port() -> int:
    ports = port_range()
    for _ in range(200):
        port = random.randrange(*ports)  # noqa: S311 (not a secret)
        if port in _given:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    raise RuntimeError(f"no free port in {ports}")


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL to the whole group, as a crash would take it (no cleanup runs)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=10)

    def freeze(self) -> None:
        """SIGSTOP to the whole group: the process holds whatever it was doing, and the
        kernel still queues connections and bytes for it, so requests sent to it wait."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGSTOP)

    def stop(self, grace: float = 10.0) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=grace)
        # Whatever it started and left behind goes too (a parent that died first).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5)


class Processes:
    """Every process a launcher starts; :meth:`stop_all` stops them newest first."""

    def __init__(self) -> None:
        self.procs: list[Proc] = []

    def start(self, name: str, argv: list[str], log: Path, *,
              env: dict[str, str] | None = None, cwd: str | Path | None = None) -> Proc:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as handle:
            popen = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     env=env, cwd=cwd)
        proc = Proc(name, popen, log)
        self.procs.append(proc)
        return proc

    def forget(self, proc: Proc) -> None:
        if proc in self.procs:
            self.procs.remove(proc)

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            if proc.popen.poll() is None:
                proc.popen.terminate()
        deadline = time.monotonic() + 10
        for proc in reversed(self.procs):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.popen.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=5)
        self.procs.clear()


def wait_until(ready: Callable[[], bool], what: str, proc: Proc | None = None,
               timeout: float = 60.0) -> None:
    """Poll ``ready()`` until it is true; fail early with the log if ``proc`` exits."""
    wait_all([Awaited(what, ready, proc)], timeout)


@dataclass(frozen=True)
class Awaited:
    """One thing :func:`wait_all` waits for: ``ready()`` true, while ``proc`` lives."""

    what: str
    ready: Callable[[], bool]
    proc: Proc | None = None


def wait_all(awaited: Sequence[Awaited], timeout: float = 60.0) -> None:
    """Poll each ``ready()`` until all are true, so that processes started together come
    up together. Fails as soon as one's process exits (naming it, with its log), not when
    the others are done; at ``timeout``, names those not ready."""
    deadline = time.monotonic() + timeout
    pending = list(awaited)
    last: object = None
    while True:
        for item in list(pending):
            if item.proc is not None and not item.proc.alive():
                raise RuntimeError(f"{item.proc.name} exited ({item.proc.popen.returncode}) "
                                   f"before {item.what}:\n{item.proc.tail()}")
            try:
                if item.ready():
                    pending.remove(item)
            except OSError as exc:
                last = exc
        if not pending:
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    what = ", ".join(item.what for item in pending)
    logs = [item.proc for item in pending if item.proc is not None]
    tails = "".join(f"\n{proc.name}'s log:\n{proc.tail()}" for proc in logs)
    raise RuntimeError(f"not {what} after {timeout:.0f} s ({last}){tails}")


def tcp_sockets(port: int) -> list[tuple[str, str]]:
    """(state, inode) of every IPv4 TCP socket whose local port is ``port``, from
    /proc/net/tcp (state ``0A`` listening, ``01`` established)."""
    found = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rsplit(":", 1)[1], 16) == port:
            found.append((fields[3], fields[9]))
    return found


def listeners(port: int) -> int:
    """How many sockets listen on ``port``."""
    return sum(1 for state, _ in tcp_sockets(port) if state == "0A")
