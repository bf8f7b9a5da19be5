"""What the garbage collector looks at once the service has started.

Everything built at startup (modules, settings, the app graph, SQLAlchemy and web3
metadata) lives as long as the process. Left in the collected generations, every full
collection walks all of it: under proxy load that was a pause of tens of milliseconds
every few seconds, the whole of the router's p99 (bench/proxy_bench.py). Frozen, the
collector only sees what requests allocate.
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> None:
    """Collect once, then move every surviving object out of the collector's sight."""
    gc.collect()
    gc.freeze()
