"""What the portal host needs, passed in by the composition root (``router/app.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from payments.chain.gateway import ChainReads
from payments.chain.params import ChainParams
from payments.cookies import CookieNames
from payments.developer.services import DeveloperServices
from payments.ledger.config import LedgerConfig
from payments.ledger.return_urls import origin_of


@dataclass(frozen=True)
class PortalConfig:
    services: DeveloperServices  # units of work (``run``) and the clock
    ledger: LedgerConfig
    dev: bool  # dev mode: the dev wallet exists; never outside dev
    # Opened by the lifespan; None before it. Reads only: nothing the portal serves signs
    # (the dev wallet's faucet is the in-process chain's, dev only).
    chain: Callable[[], ChainReads | None]

    @property
    def portal_url(self) -> str:
        return self.ledger.portal_url

    @property
    def portal_origin(self) -> str:
        return origin_of(self.ledger.portal_url)

    @property
    def base_url(self) -> str:
        return self.ledger.base_url

    @property
    def params(self) -> ChainParams:
        return self.ledger.params

    @property
    def secret_key(self) -> str:
        return self.ledger.secret_key

    @property
    def cookies(self) -> CookieNames:
        return self.services.cookies
