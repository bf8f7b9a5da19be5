"""Who a request comes from, for the per-address rate limits: the peer, or the client a
trusted proxy in front names.

Behind nginx every TCP peer is nginx, so a limit keyed on the peer is one bucket for the
whole service (deploy walk 25, finding 2). From a peer in ``SVCSRV_TRUSTED_PROXIES`` the
address is the rightmost ``X-Forwarded-For`` entry that is not a trusted proxy itself: the
one the last proxy we trust wrote. Entries left of it are whatever the client sent.
Trust is judged by the runtime proxy's :class:`~router.headers.TrustedProxies`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from router.headers import TrustedProxies

UNKNOWN = "unknown"  # no peer at all (a Unix socket): one shared key, as before


class ClientAddress:
    """``(peer, headers) -> address``; the composition root hands it to
    ``DeveloperServices.client_address``."""

    def __init__(self, trusted: TrustedProxies) -> None:
        self._trusted = trusted

    def __call__(self, peer: str | None, headers: Iterable[tuple[bytes, bytes]]) -> str:
        if not peer:
            return UNKNOWN
        if not self._trusted.trusts(peer):
            return _canonical(peer) or peer
        chain = [entry.strip() for name, value in headers if name == b"x-forwarded-for"
                 for entry in value.decode("latin-1").split(",")]
        for entry in reversed(chain):
            address = _canonical(entry)
            if address is None:
                # Not an address: a proxy we trust wrote something we cannot key on. The
                # peer's bucket (shared too widely) rather than a key a client could pick.
                break
            if not self._trusted.trusts(address):
                return address
        # No chain, a malformed one, or trusted proxies all the way: the peer.
        return _canonical(peer) or peer


def _canonical(text: str) -> str | None:
    """One spelling per address (``::FFFF:1.2.3.4`` is ``1.2.3.4``), or None for text that
    is no IP address: each spelling would otherwise be a bucket of its own."""
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)
