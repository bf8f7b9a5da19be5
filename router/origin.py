"""A developer's saved runtime origin, parsed once, and the resolver that checks its name.

Outside dev every name is resolved, the answers that are not public addresses are dropped
(``manifest.addresses``) and the connection is made to exactly a checked address, keeping
the name for ``Host`` and TLS SNI: no DNS rebinding. IP-literal origins are checked the
same way, without a lookup.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from manifest.addresses import is_public_address, parse_ip


class OriginAddressRefused(OSError):
    """The origin resolves only to addresses the service must not connect to."""


class CheckedResolver(AbstractResolver):
    """getaddrinfo in a thread, less the answers the service must not connect to."""

    def __init__(self, allow_private: bool) -> None:
        self._inner = aiohttp.ThreadedResolver()
        self._allow_private = allow_private

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        if self._allow_private:
            return results
        public = [r for r in results
                  if (ip := parse_ip(r["host"])) is not None and is_public_address(ip)]
        if not public:
            raise OriginAddressRefused(f"{host} resolves to no public address")
        return public

    async def close(self) -> None:
        await self._inner.close()


@dataclass(frozen=True, slots=True)
class Origin:
    """A saved runtime origin, parsed once."""

    base: str  # scheme://host[:port], no trailing slash
    host_header: str
    ip_literal_refused: bool
    tls: bool = False
    host: str = ""  # the name (SNI, DNS) or the IP literal, without brackets
    port: int = 80
    ip: str | None = None  # set when ``host`` is an IP literal: nothing to resolve
    host_bytes: bytes = b""  # ``host_header`` as sent


@lru_cache(maxsize=4096)
def parse_origin(origin: str, allow_private: bool) -> Origin | None:
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname
    ip = parse_ip(host)
    refused = ip is not None and not allow_private and not is_public_address(ip)
    bracketed = f"[{host}]" if ip is not None and ip.version == 6 else host
    netloc = bracketed if port is None else f"{bracketed}:{port}"
    tls = parts.scheme == "https"
    return Origin(base=f"{parts.scheme}://{netloc}", host_header=netloc,
                  ip_literal_refused=refused, tls=tls, host=host,
                  port=port if port is not None else (443 if tls else 80),
                  ip=None if ip is None else str(ip), host_bytes=netloc.encode())
