"""Which chain the settings name, as the ledger signs against it: one answer for the servers
(router/app.py) and for ``svc-ops chain`` (ops/chain.py), so that a delivery and its
settlement carry the same ``network``."""

from __future__ import annotations

from payments.chain.params import ChainParams, in_process_params, network_name
from router.settings import Settings


def chain_params(settings: Settings) -> ChainParams:
    if settings.chain_backend == "in_process":
        return in_process_params()
    # check_server requires it of a server, ops/chain.py of each chain command
    assert settings.spender_address is not None
    return ChainParams(chain_id=settings.chain_id, token=settings.usdc_address,
                       token_name=settings.usdc_name, token_version=settings.usdc_version,
                       spender=settings.spender_address,
                       network=network_name(settings.chain_id), simulated=False)
