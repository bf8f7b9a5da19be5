"""What the ledger API needs to know about the deployment, passed in by the composition root."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from payments.chain.params import ChainParams


@dataclass(frozen=True)
class LedgerConfig:
    base_url: str
    portal_url: str
    apps_domain: str
    apps_scheme: str
    runtime_url: Callable[[str], str]
    params: ChainParams
    secret_key: str
    summary_ttl: timedelta = timedelta(minutes=10)
    payment_ttl: timedelta = timedelta(minutes=5)
    handoff_ttl: timedelta = timedelta(minutes=15)

    def payment_url(self, app_slug: str, product_slug: str) -> str:
        return f"{self.base_url}/api/pay/{app_slug}/{product_slug}"
