"""Which IP addresses the service may connect to on a developer's behalf.

One rule for the runtime proxy, manifest fetches and webhook sends: only globally
routable unicast addresses, looking through IPv4 embedded in IPv6 forms.
"""

from __future__ import annotations

import ipaddress

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# ipaddress.is_global already excludes RFC 1918, loopback, link-local (incl. cloud
# metadata 169.254.169.254), CGNAT 100.64/10, documentation and reserved ranges.
_EXTRA_BLOCKED = (
    ipaddress.ip_network("64:ff9b::/96"),  # NAT64 can reach any IPv4 address, private too
    ipaddress.ip_network("64:ff9b:1::/48"),
    # Deprecated forms Python's is_global still calls global: IPv4-compatible ::a.b.c.d
    # (RFC 4291 2.5.5.1; ::127.0.0.1 is loopback to some stacks and tunnels), IPv4-translated
    # ::ffff:0:a.b.c.d (SIIT, RFC 2765: a translator hands it to any IPv4 address) and
    # site-local fec0::/10 (RFC 3879: a site's own network). Nothing public uses them.
    ipaddress.ip_network("::/96"),
    ipaddress.ip_network("::ffff:0:0:0/96"),
    ipaddress.ip_network("fec0::/10"),
)


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address hidden in an IPv4-mapped, 6to4 or Teredo IPv6 address."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def is_public_address(ip: IPAddress) -> bool:
    if isinstance(ip, ipaddress.IPv6Address):
        inner = embedded_ipv4(ip)
        if inner is not None:
            return is_public_address(inner)
        if any(ip in net for net in _EXTRA_BLOCKED):
            return False
    return ip.is_global and not ip.is_multicast


def parse_ip(text: str) -> IPAddress | None:
    """A canonical IP literal (``[::1]`` brackets allowed), or None if it is a name."""
    try:
        return ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None
