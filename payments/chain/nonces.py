"""Nonces of one sending key, allocated locally so signing never waits for the node.

One key belongs to one process (run more workers with more relayer keys: the contract takes
any number). After an error the allocator forgets what it handed out and asks the chain
again, so a nonce that never reached the node is reused rather than leaving a gap.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class NonceAllocator:
    def __init__(self, pending_count: Callable[[], int]) -> None:
        self._pending_count = pending_count
        self._next: int | None = None
        self._lock = threading.Lock()

    def allocate(self) -> int:
        with self._lock:
            if self._next is None:
                self._next = self._pending_count()
            nonce = self._next
            self._next += 1
            return nonce

    def reset(self) -> None:
        with self._lock:
            self._next = None
