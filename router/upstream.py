"""The hot-path HTTP client to developer origins: one pooled aiohttp session.

Outside dev every name is resolved, checked against the public-address rule and the
connection is made to exactly the checked address (aiohttp connects to what the
resolver returned and keeps the name for ``Host`` and TLS SNI): no DNS rebinding.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from manifest.addresses import is_public_address, parse_ip
from router.settings import Settings


class OriginAddressRefused(OSError):
    """The origin resolves only to addresses the service must not connect to."""


class CheckedResolver(AbstractResolver):
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


@dataclass(frozen=True)
class Origin:
    """A saved runtime origin, parsed once."""

    base: str  # scheme://host[:port], no trailing slash
    host_header: str
    ip_literal_refused: bool


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
    return Origin(base=f"{parts.scheme}://{netloc}", host_header=netloc,
                  ip_literal_refused=refused)


def make_session(settings: Settings, **overrides: Any) -> aiohttp.ClientSession:
    """Call inside the running loop (lifespan)."""
    connector = aiohttp.TCPConnector(
        limit=settings.proxy_pool_size, limit_per_host=0, ttl_dns_cache=10,
        resolver=CheckedResolver(settings.allow_private_origins), keepalive_timeout=30,
    )
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=settings.proxy_connect_timeout,
                                    sock_read=settings.proxy_read_timeout)
    return aiohttp.ClientSession(
        connector=connector, timeout=timeout, auto_decompress=False,
        cookie_jar=aiohttp.DummyCookieJar(), trust_env=False,
        skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
        **overrides,
    )
