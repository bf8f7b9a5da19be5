"""Who a request comes from, for the per-address rate limits: the peer, or the client a
trusted proxy in front names, as one key per client.

Behind nginx every TCP peer is nginx, so a limit keyed on the peer is one bucket for the
whole service (deploy walk 25, finding 2). From a peer in ``SVCSRV_TRUSTED_PROXIES`` the
address is the rightmost ``X-Forwarded-For`` entry that is not a trusted proxy itself: the
one the last proxy we trust wrote. Entries left of it are whatever the client sent.
Trust is judged by the runtime proxy's :class:`~router.headers.TrustedProxies`.

An IPv6 client is keyed on its /64, not its address: a /64 is what one subscriber, host or
LAN is given, and keyed per address a client could rotate through its 2^64 addresses and
never meet a limit. IPv4 addresses, mapped into IPv6 or not, are keyed whole.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from router.headers import TrustedProxies

UNKNOWN = "unknown"  # no peer at all (a Unix socket): one shared key, as before
IPV6_PREFIX = 64

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class ClientAddress:
    """``(peer, headers) -> key``; the composition root hands it to
    ``DeveloperServices.client_address``."""

    def __init__(self, trusted: TrustedProxies) -> None:
        self._trusted = trusted

    def __call__(self, peer: str | None, headers: Iterable[tuple[bytes, bytes]]) -> str:
        if not peer:
            return UNKNOWN
        peer_ip = _parse(peer)
        if peer_ip is None:
            return peer
        if not self._trusted.trusts(peer):
            return limit_key(peer_ip)
        chain = [entry.strip() for name, value in headers if name == b"x-forwarded-for"
                 for entry in value.decode("latin-1").split(",")]
        for entry in reversed(chain):
            ip = _parse(entry)
            if ip is None:
                # Not an address: a proxy we trust wrote something we cannot key on. The
                # peer's bucket (shared too widely) rather than a key a client could pick.
                break
            # Trust is the exact address's; only the key is widened to the /64.
            if not self._trusted.trusts(str(ip)):
                return limit_key(ip)
        # No chain, a malformed one, or trusted proxies all the way: the peer.
        return limit_key(peer_ip)


def limit_key(ip: IPAddress) -> str:
    """One key per client: an IPv4 address, or the /64 of an IPv6 one
    (``2001:db8:1:2::/64``). Each spelling of an address is the same key."""
    if isinstance(ip, ipaddress.IPv4Address):
        return str(ip)
    network = int(ip) >> (128 - IPV6_PREFIX) << (128 - IPV6_PREFIX)
    return str(ipaddress.IPv6Network((network, IPV6_PREFIX)))


def _parse(text: str) -> IPAddress | None:
    """The address, an IPv4-mapped IPv6 one as its IPv4 address (``::FFFF:1.2.3.4`` is
    ``1.2.3.4``), or None for text that is no IP address."""
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip
