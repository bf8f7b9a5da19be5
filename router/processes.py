"""Several server processes on one port (``SVCSRV_PROCESSES``), one Python process per core.

Each process listens on its own socket in the port's ``SO_REUSEPORT`` group, so the kernel
spreads new connections over them evenly. uvicorn's own supervisor shares one listening
socket instead, and there the process whose event loop wakes first accepts a whole burst:
measured with ``wrk -c64``, one of two processes often got every connection and the other
none. The parent holds a bound, non-listening socket on the port for its lifetime: it finds
a port in use before any process starts, and no other user can take the port meanwhile
(Linux admits only sockets of the same user into a ``SO_REUSEPORT`` group; one that does
not listen receives no connections).

The parent starts the processes (``spawn``: nothing of the parent's state is inherited),
replaces one that dies (after a growing delay when it keeps dying young), stops everything
when a process could not start (the next would fail the same way), and passes
SIGINT/SIGTERM on as SIGTERM, which lets each process finish the requests it is answering
(uvicorn's graceful shutdown). A parent that dies without a word (SIGKILL, OOM) takes its
processes with it: the kernel sends each SIGTERM.

Each process has its own accept queue: connections the kernel completed for a process that
then exits (killed, crashed, or stopping) are reset with its socket, unless
``net.ipv4.tcp_migrate_req`` is 1 (Linux 5.14+; per network namespace), which hands them to
another process of the group. The parent warns at start when it is not.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.context import SpawnProcess
from pathlib import Path
from types import FrameType

import uvicorn
from uvicorn.config import STARTUP_FAILURE

from router.heap import startup_collection_paused

log = logging.getLogger(__name__)

_spawn = multiprocessing.get_context("spawn")
# How often the parent looks at its processes; a dead one is replaced within this.
POLL_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# A process that dies sooner than this after its start is replaced after a growing delay.
QUICK_DEATH_SECONDS = 10.0
MAX_RESTART_DELAY = 30.0
MIGRATE_REQ = Path("/proc/sys/net/ipv4/tcp_migrate_req")


def port_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port) in the port's SO_REUSEPORT group, not listening."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def queued_connections_migrate(setting: Path = MIGRATE_REQ) -> bool | None:
    """Whether a closing listener's queued connections go to another socket of its
    SO_REUSEPORT group; None where the kernel has no such setting."""
    try:
        return setting.read_text().strip() != "0"
    except OSError:
        return None


def _die_with(parent: int) -> None:
    """Have the kernel send this process SIGTERM when ``parent`` dies, however it dies.

    Without it a supervisor killed with SIGKILL would leave its processes serving, and with
    ``SO_REUSEPORT`` the next deployment's processes would join them on the port: old code
    answering beside new, unseen. (Linux's ``PR_SET_PDEATHSIG``.)
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        log.warning("prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())
    if os.getppid() != parent:  # it died before the request above took effect
        raise SystemExit(0)


def _serve_one(config_of: Callable[[], uvicorn.Config], parent: int,
               configure_logging: Callable[[], None]) -> None:
    """A server process: its own socket on the port, then uvicorn until SIGTERM.

    The socket is handed over bound but not listening: the event loop's ``create_server``
    starts listening once the service has started (app built, lifespan done), so the kernel
    sends a starting process no connections to hold while it imports and connects.
    """
    try:
        # A spawned process inherits no logging: the parent's handlers first, then uvicorn's
        # (router/server_logs.py; building the config sets them), before anything is said.
        configure_logging()
        with startup_collection_paused():  # until the lifespan freezes the heap
            config = config_of()
            _die_with(parent)
            uvicorn.Server(config).run(sockets=[port_socket(config.host, config.port)])
    except Exception:
        # multiprocessing would print the traceback itself, around the handlers and their mask.
        log.exception("server process %s failed", os.getpid())
        raise SystemExit(1) from None


def restart_delay(lived: float, quick_deaths: int) -> float:
    """Seconds to wait before replacing a process that died after ``lived`` seconds, having
    died young ``quick_deaths`` times in a row before: none for one that had been up a
    while, then 1, 2, 4... up to 30 s, so a process that dies at every start (a bug, a
    dependency gone) does not spend the machine's cores on restarts."""
    if lived >= QUICK_DEATH_SECONDS:
        return 0.0
    return float(min(MAX_RESTART_DELAY, 2 ** quick_deaths))


@dataclass
class _Slot:
    process: SpawnProcess
    started: float  # time.monotonic()
    quick_deaths: int = 0  # in a row, before the current process
    restart_at: float | None = None  # dead, to be replaced at this time


class Supervisor:
    """``count`` server processes on ``host``:``port``, each calling ``configure_logging``
    first, then serving the uvicorn config ``config_of()`` builds (both module-level
    functions: the process imports them). Each process builds its own config: the parent
    then never imports the service it does not serve (the fast path's protocol class in the
    config imports all of it), which cost it about 1.3 s of CPU per start."""

    def __init__(self, host: str, port: int, count: int,
                 config_of: Callable[[], uvicorn.Config],
                 configure_logging: Callable[[], None]) -> None:
        self.host = host
        self.port = port
        self.config_of = config_of
        self.count = count
        self.configure_logging = configure_logging
        self.slots: list[_Slot] = []
        self.startup_failed = False
        self._stop = threading.Event()

    def run(self) -> int:
        """Until SIGINT/SIGTERM (0), or until a process could not start (3)."""
        try:
            reservation = port_socket(self.host, self.port)
        except OSError as exc:
            log.error("cannot bind %s:%d: %s", self.host, self.port, exc)
            return STARTUP_FAILURE
        previous = {sig: signal.signal(sig, self._on_signal)
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            log.info("serving on %s:%d with %d processes", self.host, self.port, self.count)
            if not queued_connections_migrate():
                log.warning("net.ipv4.tcp_migrate_req is not 1: connections waiting to be "
                            "accepted by a process that exits are reset with it (set it: "
                            "docs/router.md, \"Processes\")")
            self.slots = [_Slot(self._start(), time.monotonic()) for _ in range(self.count)]
            while not self._stop.wait(POLL_SECONDS):
                self._replace_dead(time.monotonic())
        finally:
            for slot in self.slots:
                if slot.process.is_alive():
                    slot.process.terminate()  # SIGTERM: uvicorn's graceful shutdown
            for slot in self.slots:
                slot.process.join()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            reservation.close()
        return STARTUP_FAILURE if self.startup_failed else 0

    def _start(self) -> SpawnProcess:
        process = _spawn.Process(target=_serve_one, daemon=False,
                                 args=(self.config_of, os.getpid(), self.configure_logging))
        process.start()
        return process

    def _replace_dead(self, now: float) -> None:
        for slot in self.slots:
            process = slot.process
            if slot.restart_at is None:
                if process.is_alive():
                    continue
                if process.exitcode == STARTUP_FAILURE:
                    log.error("server process %s could not start; stopping", process.pid)
                    self.startup_failed = True
                    self._stop.set()
                    return
                lived = now - slot.started
                delay = restart_delay(lived, slot.quick_deaths)
                slot.quick_deaths = slot.quick_deaths + 1 if delay else 0  # delay: died young
                slot.restart_at = now + delay
                log.warning("server process %s exited (%s) after %.0f s; starting another%s",
                            process.pid, process.exitcode, lived,
                            f" in {delay:.0f} s" if delay else "")
            if now >= slot.restart_at:
                slot.process, slot.started, slot.restart_at = self._start(), now, None

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        log.info("%s: stopping %d processes", signal.Signals(signum).name, self.count)
        self._stop.set()
