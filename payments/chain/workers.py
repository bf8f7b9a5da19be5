"""Running the chain workers: one cycle (relay, settle, now and then reconcile and check
budgets against their allowances), either as a background task of the server (embedded
default) or in a loop of ``svc-ops chain run``.

The relayer and the settlement worker share one relayer key, so they take turns in one
thread: their nonces then come from one allocator in order, never racing each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from payments.chain.allowlist import sync_new_recipients
from payments.chain.batching import BatchPolicy
from payments.chain.budget_drift import DriftWatch
from payments.chain.gateway import ChainError, ChainGateway
from payments.chain.reconcile import Reconciler
from payments.chain.relayer import OnRelayed, Relayer, no_hook
from payments.chain.settlement import SettlementWorker

log = logging.getLogger(__name__)


@dataclass
class ChainCycle:
    relayer: Relayer
    settlement: SettlementWorker
    reconciler: Reconciler
    reconcile_every: int = 60
    extra: tuple[tuple[str, Callable[[], object]], ...] = ()
    # budgets against allowances, findings filed (docs/chain.md, "Reconciliation")
    drift: Callable[[], object] | None = None
    drift_every: int = 300
    _count: int = 0

    @classmethod
    def build(cls, sessions: sessionmaker[Session], chain: ChainGateway, policy: BatchPolicy,
              on_relayed: OnRelayed = no_hook, reconcile_every: int = 60,
              extra: tuple[tuple[str, Callable[[], object]], ...] = ()) -> ChainCycle:
        # New pay_to addresses are read from the allowlist before anything else runs.
        steps = (*extra, ("allowlist", lambda: sync_new_recipients(sessions, chain)))
        return cls(Relayer(sessions, chain, on_relayed=on_relayed,
                           receipt_timeout=policy.receipt_timeout,
                           replace_after=policy.replace_after, hold=policy.relay_hold),
                   SettlementWorker(sessions, chain, policy=policy),
                   Reconciler(sessions, chain, log_blocks=policy.log_blocks), reconcile_every,
                   steps, DriftWatch(sessions, chain))

    def run(self) -> None:
        # Relays first: a new budget's charges settle only once its permit is on chain. A
        # revoke (or a lowering renewal) waits for the charges accepted before it, which
        # settle below, and goes in a later cycle (payments/chain/relay_hold.py).
        steps: list[tuple[str, Callable[[], object]]] = [
            *self.extra, ("relayer", self.relayer.run_once),
            ("settlement", self.settlement.run_once)]
        if self._count % self.reconcile_every == 0:
            steps.append(("reconciliation", self.reconciler.run))
        if self.drift is not None and self._count % self.drift_every == 0:
            steps.append(("budget drift", self.drift))
        self._count += 1
        for name, step in steps:
            try:
                step()
            except ChainError as exc:  # the chain is down or refused: say so, try next cycle
                log.warning("chain %s: %s", name, exc)
            except Exception:
                log.exception("chain %s failed", name)


class BackgroundWorkers:
    """The cycle every ``interval`` seconds in a thread; ``stop`` lets a running cycle end."""

    def __init__(self, cycle: ChainCycle, interval: float) -> None:
        self._cycle = cycle
        self._interval = interval
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            await asyncio.to_thread(self._cycle.run)
            with contextlib.suppress(TimeoutError):  # the interval passed: next cycle
                await asyncio.wait_for(self._stopping.wait(), self._interval)
