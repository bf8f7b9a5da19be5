"""The address per-address limits key on (router/client_address.py): the peer, or the
client the trusted proxies in front name."""

from __future__ import annotations

import ipaddress

import pytest

from router.client_address import ClientAddress
from router.headers import TrustedProxies

PROXIES = TrustedProxies((ipaddress.ip_network("10.0.0.0/8"),
                          ipaddress.ip_network("fd00::/8")))
address = ClientAddress(PROXIES)


def xff(*values: str) -> list[tuple[bytes, bytes]]:
    return [(b"accept", b"*/*"), *((b"x-forwarded-for", v.encode()) for v in values)]


@pytest.mark.parametrize(("peer", "headers", "expected"), [
    # an untrusted peer is itself, whatever it claims
    ("203.0.113.9", xff("198.51.100.7"), "203.0.113.9"),
    ("::ffff:203.0.113.9", [], "203.0.113.9"),
    # from a trusted proxy: the rightmost entry that is not a trusted proxy
    ("10.0.0.1", xff("198.51.100.7"), "198.51.100.7"),
    ("10.0.0.1", xff("6.6.6.6, 198.51.100.7"), "198.51.100.7"),
    ("10.0.0.1", xff("6.6.6.6", "198.51.100.7, 10.0.0.2"), "198.51.100.7"),
    ("10.0.0.1", xff(" 2001:DB8::1 ,10.0.0.2"), "2001:db8::/64"),
    ("fd00::1", xff("::ffff:198.51.100.7"), "198.51.100.7"),
    # an IPv6 client is its /64, however it is written; an IPv4 one its address
    ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", [], "2001:db8:1:2::/64"),
    ("10.0.0.1", xff("2001:0db8:0001:0002:0000:0000:0000:0009"), "2001:db8:1:2::/64"),
    ("10.0.0.1", xff("2001:db8:1:3::1"), "2001:db8:1:3::/64"),
    ("fe80::1%eth0", [], "fe80::/64"),
    ("::1", [], "::/64"),
    ("::ffff:7f00:2", [], "127.0.0.2"),
    # nothing to believe: the peer
    ("10.0.0.1", [], "10.0.0.1"),
    ("10.0.0.1", xff("10.0.0.3, 10.0.0.2"), "10.0.0.1"),
    ("10.0.0.1", xff("198.51.100.7, not-an-address"), "10.0.0.1"),
    ("10.0.0.1", xff("198.51.100.7:4711"), "10.0.0.1"),
    (None, xff("198.51.100.7"), "unknown"),
])
def test_the_client_behind_the_trusted_proxies(
        peer: str | None, headers: list[tuple[bytes, bytes]], expected: str) -> None:
    assert address(peer, headers) == expected


def test_trust_is_judged_on_the_address_not_its_64() -> None:
    # a proxy at fd00::1 vouches for nobody else of its /64; its client there is a client
    one = ClientAddress(TrustedProxies((ipaddress.ip_network("fd00::1/128"),)))
    assert one("fd00::1", xff("fd00::2")) == "fd00::/64"
    assert one("fd00::2", xff("198.51.100.7")) == "fd00::/64"


def test_without_trusted_proxies_the_peer() -> None:
    assert ClientAddress(TrustedProxies(()))("10.0.0.1", xff("6.6.6.6")) == "10.0.0.1"
