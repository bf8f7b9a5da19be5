"""Each app's share of an event-loop turn on the fast path.

One process's event loop serves every app. When one app's clients all send at once (2,000
of them, their slow origin answering them all at once too: case 4 of
bench/proxy_cases.py), the loop reads them in one turn and, unchecked, serves every one of
them before it looks at its sockets again: another app's request that arrived meanwhile
waited out the whole wave, tens of milliseconds. Here an app does at most ``share``
pieces of work (a request sent on, an answer written) per turn; the rest wait in that
app's queue, in their order, and run ``share`` per turn, each turn after the loop has
polled its sockets again. Another app's request then waits for at most a share of each
app that is waiting. The work done is the same, and each app's own order is kept; only
the interleaving changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)

Work = Callable[[], None]

# Pieces of work per app per turn: at the fast path's 30 to 50 us each, about a
# millisecond and a half, which is what a waiting app can add to another app's request.
SHARE = 32


class Turns:
    __slots__ = ("_loop", "_queued", "_scheduled", "_used", "deferred", "share")

    def __init__(self, loop: asyncio.AbstractEventLoop, share: int = SHARE) -> None:
        self._loop = loop
        self.share = share
        self._used: dict[str, int] = {}  # this turn's work per app
        self._queued: dict[str, deque[Work]] = {}  # per app, oldest first; never empty
        self._scheduled = False  # _turn_end is due at the end of this turn
        self.deferred = 0  # pieces of work that waited for a later turn (tests read it)

    def admit(self, app: str) -> bool:
        """Whether ``app`` may do one more piece of work now. False when its share of this
        turn is spent or work of it is already waiting: :meth:`defer` it then."""
        if app in self._queued:
            return False
        used = self._used.get(app, 0)
        if used >= self.share:
            return False
        self._used[app] = used + 1
        self._end_this_turn()
        return True

    def defer(self, app: str, work: Work) -> None:
        """Run ``work`` in a later turn, after the work of ``app`` already waiting."""
        queue = self._queued.get(app)
        if queue is None:
            queue = self._queued[app] = deque()
        queue.append(work)
        self.deferred += 1
        self._end_this_turn()

    def _end_this_turn(self) -> None:
        """Have :meth:`_turn_end` run once this turn's I/O callbacks are done."""
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._turn_end)

    def _turn_end(self) -> None:
        """Run after this turn's I/O callbacks: new shares, and each waiting app's share of
        its queue. A handle scheduled from here runs in the next turn, after a poll."""
        used = self._used
        used.clear()
        queued = self._queued
        if not queued:
            self._scheduled = False
            return
        # Still scheduled: work run here that defers more must not schedule a second one.
        share = self.share
        for app in list(queued):
            queue = queued[app]
            count = min(share, len(queue))
            used[app] = count  # the I/O of the next turn finds this app's share spent
            for _ in range(count):
                work = queue.popleft()
                try:
                    work()
                except Exception:  # one piece's failure must not keep the rest waiting
                    log.exception("fast path work of %s failed", app)
            if not queue:
                del queued[app]
        self._loop.call_soon(self._turn_end)  # the next turn renews the shares
