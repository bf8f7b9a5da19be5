"""What the garbage collector looks at once the service has started.

Everything built at startup (modules, settings, the app graph, SQLAlchemy and web3
metadata) lives as long as the process. Left in the collected generations, every full
collection walks all of it: under proxy load that was a pause of tens of milliseconds
every few seconds, the whole of the router's p99 (bench/proxy_bench.py). Frozen, the
collector only sees what requests allocate.

For the same reason the collector is paused while a server process starts: collecting as
that heap grows walked it again and again (three full collections during the imports
alone), about 15% of a process's start-up CPU (bench/startup_bench.py); the one
collection before the freeze finds whatever garbage the start made.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def startup_collection_paused() -> Iterator[None]:
    """No automatic collection until :func:`freeze_startup_heap` (or the end of the block,
    whichever comes first: a start that fails leaves the collector as it found it)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def freeze_startup_heap() -> None:
    """Collect once, then move every surviving object out of the collector's sight, and let
    the collector run again (:func:`startup_collection_paused`)."""
    gc.collect()
    gc.freeze()
    gc.enable()
