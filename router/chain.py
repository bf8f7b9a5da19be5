"""Wiring the chain: which gateway the settings choose, and the in-server workers."""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy.orm import Session, sessionmaker

from payments.chain.allowlist import ledger_allowed, mirror_to_dev_chain, sync_allowlist
from payments.chain.batching import BatchPolicy
from payments.chain.gateway import ChainError, ChainGateway
from payments.chain.in_process import InProcessChain
from payments.chain.json_rpc import JsonRpcChain, read_only
from payments.chain.params import ChainParams
from payments.chain.reader import ChainReader
from payments.chain.relayer import OnRelayed, no_hook
from payments.chain.workers import BackgroundWorkers, ChainCycle
from router.settings import Settings

log = logging.getLogger(__name__)


def open_chain(settings: Settings, params: ChainParams,
               sessions: sessionmaker[Session]) -> ChainGateway | None:
    """The gateway, or None when the JSON-RPC chain has no relayer key (statusz says so)."""
    if settings.chain_backend == "in_process":
        # A fresh EVM each start, allowlisting what the ledger calls allowed (dev seeds it).
        return InProcessChain.start(allowed_recipients=sorted(ledger_allowed(sessions)))
    if not settings.relayer_key:
        log.warning("json_rpc chain without a relayer key: nothing is relayed or settled")
        return None
    assert settings.chain_rpc_url is not None
    chain = JsonRpcChain.connect(settings.chain_rpc_url, params, settings.relayer_key,
                                 confirmations=settings.chain_confirmations,
                                 max_fee_per_gas=settings.chain_max_fee_per_gas)
    try:
        sync_allowlist(sessions, chain)  # the contract is the truth: read it into the ledger
    except ChainError as exc:  # the node may be down now; statusz and `svc-ops` tell
        log.warning("allowlist sync at start failed: %s", exc)
    return chain


def open_reads(settings: Settings, params: ChainParams) -> ChainReader | None:
    """The JSON-RPC chain's reads, for a server without a relayer key: /statusz tells the
    node's state and the missing key apart (router/health.py). No request is made here."""
    if settings.chain_backend != "json_rpc" or settings.chain_rpc_url is None:
        return None
    return read_only(settings.chain_rpc_url, params, confirmations=settings.chain_confirmations,
                     max_fee_per_gas=settings.chain_max_fee_per_gas)


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
