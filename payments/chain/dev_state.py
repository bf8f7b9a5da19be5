"""The in-process chain over key-value pairs this code holds, so it can be kept in a file.

eth-tester's py-evm backend keeps its chain in a ``MemoryDB`` (a dict of key-value pairs)
behind an ``AtomicDB``. :class:`KeptBackend` builds the same backend over a dict of ours,
:class:`TrackedDB`, which notes every key set or deleted; after each mined block those
changes are appended to the state file (``dev_state_file.StateJournal``) before
``mine_blocks`` returns, so no transaction is reported mined (to the relayer, the
settlement worker, the ledger) before its block is on disk. Blocks are the only way the
chain's state moves (eth-tester mines one per transaction), so the file always holds the
chain as of its last block.

Dev only: ``svc-server dev`` (router/dev_chain.py). Tests and every other server keep the
plain :meth:`InProcessChain.start`, whose chain lives and dies with the process.
"""

from __future__ import annotations

import hashlib
import logging
import os
from importlib.metadata import version
from typing import Any

from eth.db.atomic import AtomicDB
from eth.db.backends.memory import MemoryDB
from eth_tester import PyEVMBackend  # type: ignore[import-untyped]

from payments.chain.contracts import CONTRACT_NAMES, load_artifact
from payments.chain.dev_state_file import StateHeader, StateJournal
from payments.chain.params import in_process_params

log = logging.getLogger(__name__)
ZERO_ADDRESS = bytes(20)


class TrackedDB(MemoryDB):
    """py-evm's in-memory store, noting what changed since the changes were last taken."""

    def __init__(self, pairs: dict[bytes, bytes]) -> None:
        super().__init__(pairs)
        self.changes: dict[bytes, bytes | None] = {}

    def __setitem__(self, key: bytes, value: bytes) -> None:
        super().__setitem__(key, value)
        self.changes[key] = value

    def __delitem__(self, key: bytes) -> None:
        super().__delitem__(key)
        self.changes[key] = None

    @property
    def pairs(self) -> dict[bytes, bytes]:
        return self.kv_store


class KeptBackend(PyEVMBackend):  # type: ignore[misc]  # eth-tester ships no types
    """eth-tester's py-evm backend on ``pairs`` (a kept chain's), or on a new genesis; with
    a ``journal``, each mined block's changes are appended to it before anyone learns the
    block was mined."""

    chain: Any  # py-evm's MiningChain of eth-tester's configuration

    def __init__(self, pairs: dict[bytes, bytes] | None = None) -> None:
        # A new genesis (the chain class, its VMs, the test accounts), its extra data random:
        # its hash names this chain and no other (eth-tester's differ only by the second).
        super().__init__(genesis_parameters=PyEVMBackend.generate_genesis_params(
            overrides={"extra_data": os.urandom(32)}))
        if pairs is None:
            pairs = dict(self.chain.chaindb.db.wrapped_db.kv_store)
        self.db = TrackedDB(pairs)
        # The class eth-tester configured (chain id, forks), over our store instead.
        self.chain = type(self.chain)(AtomicDB(self.db))
        self.journal: StateJournal | None = None

    def mine_blocks(self, num_blocks: int = 1,
                    coinbase: bytes = ZERO_ADDRESS) -> tuple[bytes, ...]:
        hashes: tuple[bytes, ...] = super().mine_blocks(num_blocks, coinbase)
        self.save()
        return hashes

    def save(self) -> None:
        """Append what changed since the last save. A failed write keeps the changes for
        the next block's save to try again; the dev server goes on either way (the next
        start sees the file behind the ledger and starts a new chain, saying why)."""
        if self.journal is None or not self.db.changes:
            return
        try:
            self.journal.append(self.db.changes)
        except OSError as exc:
            log.error("the dev chain's block could not be written to %s (%s); until a "
                      "write succeeds, a restart cannot bring this chain back",
                      self.journal.path, exc)
            return
        self.db.changes = {}

    @property
    def genesis(self) -> str:
        return "0x" + bytes(self.chain.chaindb.get_canonical_block_hash(0)).hex()

    def has_transaction(self, tx_hash: str) -> int | None:
        """The number of the block holding ``tx_hash``, None when the chain has none."""
        from eth.exceptions import TransactionNotFound

        try:
            number, _index = self.chain.chaindb.get_transaction_index(
                bytes.fromhex(tx_hash.removeprefix("0x")))
        except (TransactionNotFound, ValueError):
            return None
        return int(number)


def contracts_digest() -> str:
    """Which contract code a chain was deployed from: a chain kept from older artifacts
    would run the old contracts at the same addresses."""
    digest = hashlib.sha256()
    for name in CONTRACT_NAMES:
        digest.update(name.encode() + b"\0" + load_artifact(name).bytecode.encode() + b"\0")
    return digest.hexdigest()


def header_for(genesis: str) -> StateHeader:
    """The header this code writes, and expects, for the chain that began at ``genesis``."""
    params = in_process_params()
    return StateHeader(chain_id=params.chain_id, genesis=genesis, token=params.token,
                       spender=params.spender, contracts=contracts_digest(),
                       py_evm=version("py-evm"), eth_tester=version("eth-tester"))


def header_mismatch(header: StateHeader) -> str | None:
    """Why a file's header is not one this code can take up, or None."""
    expected = header_for(header.genesis)
    if header.contracts != expected.contracts:
        return "its contracts were deployed from other artifacts than this checkout's"
    if (header.py_evm, header.eth_tester) != (expected.py_evm, expected.eth_tester):
        return (f"it was written by py-evm {header.py_evm} and eth-tester "
                f"{header.eth_tester}, not the installed {expected.py_evm} and "
                f"{expected.eth_tester}")
    if header != expected:
        return "it names another chain id or other contract addresses"
    return None
