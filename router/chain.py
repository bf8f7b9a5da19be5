"""Wiring the chain: what the settings choose (the reads every server serves, the gateway
only for the chain workers), and the in-server workers."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from payments.chain.allowlist import ledger_allowed, mirror_to_dev_chain, sync_allowlist
from payments.chain.batching import BatchPolicy
from payments.chain.gateway import ChainError, ChainGateway, ChainReads
from payments.chain.in_process import InProcessChain
from payments.chain.json_rpc import JsonRpcChain, read_only
from payments.chain.params import ChainParams
from payments.chain.relayer import OnRelayed, no_hook
from payments.chain.workers import BackgroundWorkers, ChainCycle
from router.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerChain:
    """What a server opens: the reads its requests ask (the portal's wallet reads,
    /statusz), and the gateway only where this process runs the chain workers with a key.
    Nothing a request reaches holds a signer (router/resources.py keeps only ``reads``)."""

    reads: ChainReads
    gateway: ChainGateway | None = None

    @property
    def relayer(self) -> str | None:
        """The address this process signs for; None: it signs nothing."""
        return None if self.gateway is None else self.gateway.relayer


def open_chain(settings: Settings, params: ChainParams, sessions: sessionmaker[Session],
               dev_chain_state: Path | None = None) -> ServerChain:
    """The chain the settings choose; a JSON-RPC chain's allowlist is read into the ledger
    at start (a read: with or without a key). ``dev_chain_state``: the file ``svc-server
    dev`` keeps its in-process chain in (router/dev_chain.py); no other server keeps one."""
    if settings.chain_backend == "in_process":
        chain = open_in_process(sessions, dev_chain_state)
        return ServerChain(chain, chain if settings.chain_workers else None)
    assert settings.chain_rpc_url is not None
    gateway: JsonRpcChain | None = None
    if settings.chain_workers and settings.relayer_key:
        gateway = JsonRpcChain.connect(settings.chain_rpc_url, params, settings.relayer_key,
                                       confirmations=settings.chain_confirmations,
                                       max_fee_per_gas=settings.chain_max_fee_per_gas)
    elif settings.chain_workers:
        log.warning("json_rpc chain without a relayer key: this server was asked to run the "
                    "chain workers, but it relays and settles nothing (/statusz: "
                    "not_configured); its reads need no key")
    # Without chain workers a key, if set, stays unused: `svc-ops chain run` signs.
    reads: ChainReads = gateway if gateway is not None else read_only(
        settings.chain_rpc_url, params, confirmations=settings.chain_confirmations,
        max_fee_per_gas=settings.chain_max_fee_per_gas)
    try:
        sync_allowlist(sessions, reads)  # the contract is the truth: read it into the ledger
    except ChainError as exc:  # the node may be down now; statusz and `svc-ops` tell
        log.warning("allowlist sync at start failed: %s", exc)
    return ServerChain(reads, gateway)


def open_in_process(sessions: sessionmaker[Session],
                    dev_chain_state: Path | None) -> InProcessChain:
    if dev_chain_state is None:
        # A fresh EVM each start, allowlisting what the ledger calls allowed (dev seeds it).
        return InProcessChain.start(allowed_recipients=sorted(ledger_allowed(sessions)))
    from router.dev_chain import open_dev_chain  # py-evm's storage: svc-server dev only

    opened = open_dev_chain(sessions, dev_chain_state)
    if opened.kept:
        log.info("the in-process chain was taken up from %s (block %d)", dev_chain_state,
                 opened.chain.block_number())
    if opened.note:
        log.warning("%s", opened.note)
    return opened.chain


def start_workers(settings: Settings, sessions: sessionmaker[Session],
                  chain: ChainGateway) -> BackgroundWorkers:
    policy = BatchPolicy(max_charges=settings.settlement_batch_size,
                         max_age=settings.settlement_batch_age,
                         log_blocks=settings.chain_log_blocks)
    on_relayed: OnRelayed = no_hook
    extra: tuple[tuple[str, Callable[[], object]], ...] = ()
    if isinstance(chain, InProcessChain):
        on_relayed = chain.top_up  # the dev faucet: a relayed budget gets test USDC behind it
        extra = (("dev allowlist", lambda: mirror_to_dev_chain(sessions, chain)),)
    cycle = ChainCycle.build(sessions, chain, policy, on_relayed, extra=extra)
    workers = BackgroundWorkers(cycle, settings.chain_worker_interval)
    workers.start()
    return workers
