"""What webhook management needs, built once by the composition root (``router/webhooks.py``)
and shared by the JSON API and the console."""

from __future__ import annotations

from dataclasses import dataclass, field

from payments.chain.params import ChainParams
from payments.developer.services import DeveloperServices
from payments.ratelimit import Limit
from payments.webhooks.endpoints import UrlChecks
from payments.webhooks.signing_secrets import SecretBox


@dataclass(frozen=True)
class WebhookLimits:
    """Per developer account (spec 8 item 2), the API's and the console's calls together."""

    management: Limit = Limit("webhook-management", 30, 60)
    test: Limit = Limit("webhook-test", 10, 60)


@dataclass(frozen=True)
class WebhookServices:
    developer: DeveloperServices
    checks: UrlChecks
    box: SecretBox
    params: ChainParams
    limits: WebhookLimits = field(default_factory=WebhookLimits)
