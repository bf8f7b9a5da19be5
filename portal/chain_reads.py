"""Chain reads for the portal: the token's permit nonce and a balance, off the event loop.

They need no key: a server without one (its chain workers run elsewhere) reads its node as
one with a key does. A chain that is down never breaks a page: the nonce falls back to the
ledger's own record and the balance is shown as unknown.
"""

from __future__ import annotations

import logging

import anyio.to_thread

from payments.chain.gateway import ChainError, ChainReads

log = logging.getLogger(__name__)


async def permit_nonce(chain: ChainReads | None, owner: str) -> int | None:
    if chain is None:
        return None
    try:
        return await anyio.to_thread.run_sync(chain.permit_nonce, owner)
    except ChainError as exc:
        log.warning("permit nonce read failed: %s", exc)
        return None


async def usdc_balance(chain: ChainReads | None, owner: str) -> int | None:
    if chain is None:
        return None
    try:
        return await anyio.to_thread.run_sync(chain.usdc_balance, owner)
    except ChainError as exc:
        log.warning("balance read failed: %s", exc)
        return None
