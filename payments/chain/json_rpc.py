"""A node over JSON-RPC (Base Sepolia in production; Hardhat in the tests).

Addresses come in ``params``, the relayer key as an argument: neither the key nor the node
URL (which often embeds a provider's API key) ever reaches a log line or a ``repr``.
"""

from __future__ import annotations

import logging

from web3 import HTTPProvider, Web3

from payments.chain.params import ChainParams
from payments.chain.reader import ChainReader
from payments.chain.web3_chain import Web3Chain

BASE_SEPOLIA_CONFIRMATIONS = 3


class _QuietHTTPProvider(HTTPProvider):
    """web3's provider writes the URL into its debug lines; ours has no debug level."""

    logger = logging.getLogger("payments.chain.json_rpc.provider")
    logger.setLevel(logging.INFO)


def node(rpc_url: str, timeout: float = 15.0) -> Web3:
    """The node at ``rpc_url``, over HTTP."""
    return Web3(_QuietHTTPProvider(rpc_url, request_kwargs={"timeout": timeout}))


class JsonRpcChain(Web3Chain):
    @classmethod
    def connect(cls, rpc_url: str, params: ChainParams, relayer_key: str, *,
                confirmations: int = BASE_SEPOLIA_CONFIRMATIONS, timeout: float = 15.0,
                poll_interval: float = 1.0, max_fee_per_gas: int | None = None) -> JsonRpcChain:
        return cls(node(rpc_url, timeout), params, relayer_key, confirmations=confirmations,
                   poll_interval=poll_interval, max_fee_per_gas=max_fee_per_gas)


def read_only(rpc_url: str, params: ChainParams, *,
              confirmations: int = BASE_SEPOLIA_CONFIRMATIONS, timeout: float = 15.0,
              poll_interval: float = 1.0, max_fee_per_gas: int | None = None) -> ChainReader:
    """The node without a relayer key: its reads, and owner transactions signed with a key
    handed in per call (a monitoring host, a server without a key, the owner's commands)."""
    return ChainReader(node(rpc_url, timeout), params, confirmations=confirmations,
                       poll_interval=poll_interval, max_fee_per_gas=max_fee_per_gas)
