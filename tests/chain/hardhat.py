"""A Hardhat node (npm, ``contracts/node_modules``) on a free loopback port, with our
contracts deployed by Hardhat's first (publicly known) account: the local topology's own
launcher (ops/cluster/services.py)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ops.cluster.processes import Processes
from ops.cluster.services import HARDHAT_OWNER_KEY, HARDHAT_RELAYER_KEY, start_hardhat
from payments.chain.params import ChainParams

OWNER_KEY = bytes.fromhex(HARDHAT_OWNER_KEY[2:])
RELAYER_KEY = HARDHAT_RELAYER_KEY


@dataclass(frozen=True)
class HardhatNode:
    url: str
    params: ChainParams


@contextmanager
def hardhat_node() -> Iterator[HardhatNode]:
    procs = Processes()
    with tempfile.TemporaryDirectory(prefix="svc-hardhat-") as logs:
        try:
            node = start_hardhat(procs, Path(logs))
            yield HardhatNode(node.url, node.params)
        finally:
            procs.stop_all()
