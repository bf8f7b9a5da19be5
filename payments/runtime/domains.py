"""Whether a runtime hostname already points at the router, asked of DNS.

An operator approves ``<slug>.{apps_domain}`` only when its public DNS answers are the
router's addresses and nothing else: a name that also answers elsewhere would send some
visitors (and certificate validation) to a server that is not ours.
"""

from __future__ import annotations

from ipaddress import ip_address

from manifest.addresses import IPAddress
from manifest.url_policy import Resolver, UrlRefused
from payments.errors import ApiError


def check_points_at_router(hostname: str, router_addresses: tuple[str, ...],
                           resolver: Resolver) -> list[IPAddress]:
    """The answers for ``hostname``; refused unless every one is a router address."""
    if not router_addresses:
        raise ApiError("router_addresses_unset", 409, "Set SVCSRV_ROUTER_ADDRESSES to the "
                       "router's public addresses; approval checks the hostname resolves "
                       "to them.")
    ours = {ip_address(a) for a in router_addresses}
    try:
        answers = resolver.resolve(hostname)
    except UrlRefused as exc:
        raise ApiError("domain_dns_not_ready", 409, f"{hostname} cannot be approved yet: "
                       f"{exc.message}. Create its DNS records pointing at "
                       f"{', '.join(router_addresses)} first.") from None
    foreign = sorted({str(a) for a in answers if a not in ours})
    if foreign:
        raise ApiError("domain_dns_not_ready", 409, f"{hostname} resolves to "
                       f"{', '.join(foreign)}, not only to the router "
                       f"({', '.join(router_addresses)}); fix its DNS records first.")
    return answers
