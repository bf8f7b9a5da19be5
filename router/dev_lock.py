"""One ``svc-server dev`` per data directory (``var/``).

Two servers on one ``var/`` share the ledger but not the chain: each would relay and settle
the other's rows on its own chain, and both would append to ``var/chain-state``, whose
records would then mix two chains. The second one stops at once instead, saying so, as a
second one on a taken port does.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

LOCK_FILE = "svc-server-dev.lock"


class DataDirInUse(Exception):
    """Another ``svc-server dev`` holds the data directory."""


@contextlib.contextmanager
def holding(data_dir: Path) -> Iterator[None]:
    """Hold ``data_dir`` for as long as the context runs (an exclusive ``flock`` on a file
    in it, released by the system however the process ends)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: nothing to hold it with
        yield
        return
    data_dir.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DataDirInUse(
                f"another svc-server dev is running on {data_dir} (its ledger and its "
                "chain); stop it first, or start this one in another directory.") from None
        yield
    finally:
        os.close(descriptor)
