"""``svc-ops chain run``: the chain cycle in a loop, its heartbeat, and a stop between cycles.

SIGTERM (``docker compose restart chain``, an upgrade's step 3) or Ctrl-C lets the cycle in
progress finish and exits 0: a kill between claiming a batch and recording its transaction
would leave that batch waiting ``unsent_grace`` (docs/chain.md). A second signal stops at
once, as the first used to. After each cycle the worker writes its heartbeat
(payments/chain/heartbeat.py), whose age the servers' ``/statusz`` reports.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from payments.chain.heartbeat import beat
from payments.db import utcnow

log = logging.getLogger(__name__)
_NAP = 0.2  # how long a stop may wait for the interval's sleep


class Cycle(Protocol):
    def run(self) -> None: ...


class StopRequest:
    """Set by SIGTERM/SIGINT. The handler only flips a flag: a signal handler runs in the
    main thread between bytecodes, where taking a lock (``threading.Event.set``) could
    deadlock against the interrupted code holding it."""

    def __init__(self) -> None:
        self.requested = False

    @contextmanager
    def installed(self) -> Iterator[StopRequest]:
        signals = (signal.SIGTERM, signal.SIGINT)
        previous = {sig: signal.getsignal(sig) for sig in signals}

        def handle(signum: int, frame: FrameType | None) -> None:
            self.requested = True
            print(f"{signal.Signals(signum).name}: finishing this cycle, then stopping",
                  flush=True)
            for sig in signals:  # a second signal stops at once, as before
                signal.signal(sig, signal.SIG_DFL)

        for sig in signals:
            signal.signal(sig, handle)
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def sleep(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        """The interval between cycles, cut short by a stop."""
        deadline = clock() + seconds
        while not self.requested and (left := deadline - clock()) > 0:
            time.sleep(min(_NAP, left))


def run_worker(cycle: Cycle, sessions: sessionmaker[Session], relayer: str, interval: float,
               once: bool = False) -> int:
    """Cycles until stopped; exit code 0. ``relayer`` is the address (never the key)."""
    stop = StopRequest()
    print(f"chain worker running for relayer {relayer}, a cycle every {interval:g} s; "
          "SIGTERM or Ctrl-C stops it after the cycle in progress", flush=True)
    cycles = 0
    with stop.installed():
        while not stop.requested:
            cycle.run()  # catches and logs its steps' failures itself
            cycles += 1
            try:
                beat(sessions, relayer, cycles, utcnow())
            except Exception as exc:  # the database is down: the next cycle says so too
                log.warning("chain worker heartbeat not written: %s", type(exc).__name__)
            if once:
                break
            stop.sleep(interval)
    print(f"chain worker stopped after {cycles} cycle(s)", flush=True)
    return 0
