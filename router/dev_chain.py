"""``svc-server dev``: the in-process chain kept beside the ledger, taken up at the next start.

The chain lives in ``var/chain-state`` (payments/chain/dev_state_file.py), appended to after
every mined block. The ledger names the chain its rows are on: the ``dev_chain`` row of
``chain_cursors`` holds that chain's genesis hash (a new chain has a new one) and where its
``chain_transactions`` begin (:class:`Binding`). At start
the file is taken up only when all of these hold, else a new chain starts, the file is
moved aside to ``chain-state.rejected`` and the server says why (router/dev_chain_note.py):

- the file reads whole (a last block cut short is dropped: the ledger was never told it
  was mined, and the workers send its transactions again);
- it was written for this checkout's contracts, by the installed py-evm and eth-tester;
- its genesis is the one the ledger names;
- every transaction the ledger records as mined on that chain is in it, in the block
  recorded.

Nothing else of the ledger is read or written here: a new chain leaves the ledger's rows
as they are (only the ``dev_chain`` row then names the new chain).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from payments.chain.allowlist import ledger_allowed, mirror_to_dev_chain
from payments.chain.dev_state import KeptBackend, header_for, header_mismatch
from payments.chain.dev_state_file import (
    StateFile,
    StateFileError,
    StateJournal,
    read_state,
    write_state,
)
from payments.chain.gateway import ChainError
from payments.chain.in_process import InProcessChain
from payments.chain.models import ChainCursor, ChainTransaction, TxStatus
from payments.db import transaction, utcnow
from router.dev_chain_note import new_chain_note

log = logging.getLogger(__name__)

STATE_FILE = "chain-state"
BINDING = "dev_chain"  # the chain_cursors row naming the ledger's chain (its genesis)


@dataclass(frozen=True)
class DevChain:
    chain: InProcessChain
    kept: bool  # taken up from the file (False: a new chain)
    note: str | None  # a warning for the developer, once


def open_dev_chain(sessions: sessionmaker[Session], path: Path) -> DevChain:
    """The chain ``path`` keeps, if it is the ledger's; else a new one, kept there from now
    on. Either way every later block is appended to ``path`` as it is mined."""
    why, state = _read(path)
    if state is not None:
        why = header_mismatch(state.header) or _other_chain(sessions, state.header.genesis)
    if state is not None and why is None:
        chain, why = _take_up(sessions, path, state)
        if chain is not None:
            if state.dropped_tail:
                log.warning("%s ended in a block cut short (the server stopped while writing "
                            "it); it was dropped, and its transactions, which the ledger "
                            "never saw mined, are sent again", path)
            return DevChain(chain, kept=True, note=None)
    assert why is not None
    set_aside = _set_aside(path) if state is not None or path.exists() else None
    chain = _new_chain(sessions, path)
    return DevChain(chain, kept=False,
                    note=new_chain_note(sessions, why, path.parent, set_aside))


def _read(path: Path) -> tuple[str | None, StateFile | None]:
    try:
        return None, read_state(path)
    except FileNotFoundError:
        return f"there is no {path}", None
    except (StateFileError, OSError) as exc:
        return f"{path} cannot be read: {exc}", None


@dataclass(frozen=True)
class Binding:
    """The ``dev_chain`` row: the chain's genesis (``position``, 64 hex digits) and the last
    ``chain_transactions`` id recorded before that chain began (``block``): those earlier
    rows are of chains that are gone, the later ones of this chain."""

    genesis: str
    since_tx_id: int


def bound_chain(sessions: sessionmaker[Session]) -> Binding | None:
    """The chain the ledger's rows are on, if a dev server named one."""
    with sessions() as session:
        row = session.get(ChainCursor, BINDING)
        if row is None or row.position is None:
            return None
        return Binding("0x" + row.position, row.block)


def _bind(sessions: sessionmaker[Session], genesis: str) -> None:
    with transaction(sessions) as session:
        last = session.scalar(select(func.max(ChainTransaction.id))) or 0
        row = session.get(ChainCursor, BINDING, with_for_update=True)
        if row is None:
            row = ChainCursor(name=BINDING, block=0)
            session.add(row)
        row.position = genesis.removeprefix("0x")  # 64 hex digits: the column's width
        row.block = last
        row.updated_at = utcnow()


def _other_chain(sessions: sessionmaker[Session], genesis: str) -> str | None:
    bound = bound_chain(sessions)
    if bound is None:
        return "the database names no chain of its own (it was made after this file)"
    if bound.genesis != genesis:
        return f"it is another chain than the database's (genesis {genesis}, the " \
               f"database's {bound.genesis})"
    return None


def _missing_transaction(sessions: sessionmaker[Session], backend: KeptBackend) -> str | None:
    """The first transaction the ledger records as mined on this chain that the chain
    lacks, in words. Rows of earlier, lost chains are left out: they never will be."""
    bound = bound_chain(sessions)
    since = 0 if bound is None else bound.since_tx_id
    with sessions() as session:
        mined = session.execute(select(ChainTransaction.tx_hash, ChainTransaction.block_number)
                                .where(ChainTransaction.status.in_((TxStatus.CONFIRMED,
                                                                    TxStatus.REVERTED)),
                                       ChainTransaction.tx_hash.is_not(None),
                                       ChainTransaction.id > since)
                                .order_by(ChainTransaction.id.desc())).all()
    for tx_hash, recorded in mined:
        assert tx_hash is not None
        found = backend.has_transaction(tx_hash)
        if found is None or (recorded is not None and found != recorded):
            where = "" if recorded is None else f" in block {recorded}"
            return (f"it lacks transaction {tx_hash}, which the database records as mined"
                    f"{where} (the file is behind the database)")
    return None


def _take_up(sessions: sessionmaker[Session], path: Path,
             state: StateFile) -> tuple[InProcessChain | None, str | None]:
    try:
        backend = KeptBackend(state.pairs)
        if backend.genesis != state.header.genesis:
            return None, "its blocks do not begin at the genesis its header names"
        if (why := _missing_transaction(sessions, backend)) is not None:
            return None, why
        chain = InProcessChain.resume(backend)
    except ChainError as exc:
        return None, f"{path} holds no usable chain: {exc}"
    except Exception as exc:  # pairs py-evm cannot read: a new chain, and the reason said
        return None, f"{path} holds no usable chain: {type(exc).__name__}: {exc}"
    # Written anew, whole (no dropped tail for the next append to sit behind), then
    # appended to block by block.
    _keep(backend, path, state.header.genesis)
    mirror_to_dev_chain(sessions, chain)  # `svc-ops allowlist` decisions taken meanwhile
    return chain, None


def _new_chain(sessions: sessionmaker[Session], path: Path) -> InProcessChain:
    backend = KeptBackend()
    _keep(backend, path, backend.genesis)
    chain = InProcessChain.start(allowed_recipients=sorted(ledger_allowed(sessions)),
                                 backend=backend)
    _bind(sessions, backend.genesis)
    return chain


def _keep(backend: KeptBackend, path: Path, genesis: str) -> None:
    try:
        write_state(path, header_for(genesis), backend.db.pairs)
    except OSError as exc:
        log.error("the dev chain cannot be kept in %s (%s): it lives until the server "
                  "stops", path, exc)
        return
    backend.db.changes = {}
    backend.journal = StateJournal(path)


def _set_aside(path: Path) -> Path | None:
    aside = path.with_name(path.name + ".rejected")
    with contextlib.suppress(FileNotFoundError):
        try:
            path.replace(aside)
        except OSError as exc:
            log.error("%s could not be moved aside (%s); it will be overwritten", path, exc)
            return None
        return aside
    return None
