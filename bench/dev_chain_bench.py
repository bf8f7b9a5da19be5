"""What keeping ``svc-server dev``'s in-process chain costs (router/dev_chain.py).

    .venv/bin/python bench/dev_chain_bench.py [--rounds 6] [--blocks 200] [--dry-run]

Each round mines ``--blocks`` blocks of one owner transaction each (a TestUSDC mint, the
dev faucet's: simulated, signed, sent, receipt read, as every transaction of ours) on a new
in-process chain, once as tests and other servers run it (nothing kept), once over our
store noting each change but writing nothing, and once as ``svc-server dev`` runs it (each
block's changes appended to the state file and fsynced before the transaction is reported
mined), the order rotating each round. Reported: the wall time per transaction of each,
the append's own time per block (median, mean, p95), the bytes a block adds,
and, at the end of the last kept chain: the file's size, the time a start takes to take it
up (read, checks, the chain rebuilt, the file written anew), and what writing the whole file
(the other design: a snapshot after every block) takes at that size. The state file is
written where this runs (``--dir``, default a temporary directory under the current one, so
it is on the disk ``var/`` would be on). Writes its section of docs/BENCHMARKS.md unless
``--dry-run``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from report import write_section  # bench/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from payments.chain.dev_state import KeptBackend, header_for  # noqa: E402
from payments.chain.dev_state_file import (  # noqa: E402
    Changes,
    StateJournal,
    read_state,
    write_state,
)
from payments.chain.in_process import InProcessChain  # noqa: E402

HEADING = "## Keeping the dev chain (bench/dev_chain_bench.py)"
RECIPIENT = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"


class TimedJournal(StateJournal):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.seconds: list[float] = []

    def append(self, changes: Changes) -> None:
        began = time.perf_counter()
        super().append(changes)
        self.seconds.append(time.perf_counter() - began)


def mine(chain: InProcessChain, blocks: int) -> float:
    """Seconds per transaction over ``blocks`` mints."""
    began = time.perf_counter()
    for _ in range(blocks):
        chain.faucet(RECIPIENT, 1)
    return (time.perf_counter() - began) / blocks


def plain(blocks: int) -> float:
    return mine(InProcessChain.start(), blocks)


def tracked(blocks: int) -> float:
    """Our store under the chain, nothing written: what noting the changes costs."""
    return mine(InProcessChain.start(backend=KeptBackend()), blocks)


def kept(blocks: int, path: Path) -> tuple[float, list[float], float]:
    """Per transaction, each append's seconds, bytes per block."""
    backend = KeptBackend()
    write_state(path, header_for(backend.genesis), backend.db.pairs)
    journal = TimedJournal(path)
    backend.journal = journal
    chain = InProcessChain.start(backend=backend)
    size = path.stat().st_size
    per_tx = mine(chain, blocks)
    per_block = (path.stat().st_size - size) / blocks
    return per_tx, journal.seconds[-blocks:], per_block


def take_up(path: Path) -> float:
    began = time.perf_counter()
    state = read_state(path)
    backend = KeptBackend(state.pairs)
    InProcessChain.resume(backend)
    write_state(path, state.header, backend.db.pairs)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--blocks", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--dry-run", action="store_true", help="print only")
    options = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="dev-chain-bench-", dir=options.dir or Path()))
    load = os.getloadavg()
    runs: dict[str, list[float]] = {"plain": [], "tracked": [], "kept": []}
    appends: list[float] = []
    sizes: list[float] = []
    path = directory / "chain-state"
    try:
        for i in range(options.rounds):
            path.unlink(missing_ok=True)
            order = list(runs)
            for which in order[i % 3:] + order[:i % 3]:
                if which == "plain":
                    runs[which].append(plain(options.blocks))
                elif which == "tracked":
                    runs[which].append(tracked(options.blocks))
                else:
                    per_tx, seconds, per_block = kept(options.blocks, path)
                    runs[which].append(per_tx)
                    appends += seconds
                    sizes.append(per_block)
            print(f"round {i + 1}: " + ", ".join(f"{name} {values[-1] * 1e3:.1f} ms"
                                                   for name, values in runs.items()),
                  flush=True)
        size = path.stat().st_size
        blocks = options.blocks + 7  # the deploy's blocks too
        take = statistics.median(take_up(path) for _ in range(3))
        state = read_state(path)
        rewrites = []
        for _ in range(5):
            began = time.perf_counter()
            write_state(directory / "whole", state.header, state.pairs)
            rewrites.append(time.perf_counter() - began)
        rewrite = statistics.median(rewrites)
    finally:
        shutil.rmtree(directory, ignore_errors=True)

    def ratio(name: str) -> float:
        return statistics.median(v / p for v, p in zip(runs[name], runs["plain"], strict=True))

    appends.sort()
    p95 = appends[int(len(appends) * 0.95)]
    section = "\n".join([
        HEADING, "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on `{platform.machine()}`, nproc "
        f"{os.cpu_count()}, Python {platform.python_version()}. Load average at start: "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (a shared machine).", "",
        f"{options.rounds} rounds of {options.blocks} blocks, one owner transaction each (a "
        "TestUSDC mint, as the dev faucet sends: simulated, signed, sent, receipt read), on "
        "a new in-process chain: nothing kept (tests, other servers), our store under the "
        "chain noting changes but nothing written, and kept as `svc-server dev` keeps it "
        "(each block's changes appended to `var/chain-state` and fsynced before the "
        "transaction is reported mined), the order rotating each round; medians, the ratios "
        "the median of each round's.", "",
        "| per transaction | median | against nothing kept |", "|---|---:|---:|",
        f"| nothing kept | {statistics.median(runs['plain']) * 1e3:.1f} ms | |",
        f"| changes noted, nothing written | {statistics.median(runs['tracked']) * 1e3:.1f} "
        f"ms | {ratio('tracked'):.3f}x |",
        f"| kept (`svc-server dev`) | {statistics.median(runs['kept']) * 1e3:.1f} ms | "
        f"**{ratio('kept'):.3f}x** |", "",
        "The append itself (write and fsync of one block's record): median "
        f"{statistics.median(appends) * 1e3:.2f} ms, mean {statistics.fmean(appends) * 1e3:.2f} "
        f"ms, p95 {p95 * 1e3:.2f} ms per block, {statistics.median(sizes) / 1024:.1f} KiB per "
        f"block. After {blocks} blocks the file holds {size / 1024:.0f} KiB; a start takes it "
        f"up (read, rebuilt, contracts checked, written anew) in {take * 1e3:.0f} ms; writing "
        f"the whole file, which a snapshot after every block would do, takes "
        f"{rewrite * 1e3:.1f} ms at that size and grows with the chain, where the append "
        "stays the size of one block.", "",
    ])
    print(section)
    if not options.dry_run:
        write_section(HEADING, section)


if __name__ == "__main__":
    main()
