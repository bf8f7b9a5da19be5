"""The clients to developer origins, opened and closed with the lifespan's HTTP session.

The hot path (plain HTTP requests) goes through :class:`router.upstream_client.UpstreamClient`;
WebSocket upgrades through aiohttp. Both resolve names with the same
:class:`router.origin.CheckedResolver` and connect to exactly a checked address. The
session's connector owns the upstream client, so closing the session closes both.
"""

from __future__ import annotations

import ssl
from typing import Any

import aiohttp

from router.origin import CheckedResolver, Origin, OriginAddressRefused, parse_origin
from router.settings import Settings
from router.upstream_client import UpstreamClient

__all__ = ["CheckedResolver", "Origin", "OriginAddressRefused", "ProxyConnector",
           "RedirectRefused", "make_session", "parse_origin", "upstream_client"]


class RedirectRefused(aiohttp.ClientError):
    """An origin answered a WebSocket upgrade with a redirect, which is never followed."""


async def _refuse_redirect(session: aiohttp.ClientSession, context: object,
                           params: aiohttp.TraceRequestRedirectParams) -> None:
    # aiohttp's ws_connect follows redirects (up to 10) and has no switch for it. Followed,
    # an origin's Location sent the upgrade anywhere, and an IP-literal target is never put
    # to the resolver that checks addresses: 127.0.0.1, 169.254.169.254, the servers'
    # network, with the client's headers. Browsers fail a redirected handshake anyway.
    raise RedirectRefused(f"the origin answered {params.response.status} to an upgrade")


def _no_redirects() -> aiohttp.TraceConfig:
    config = aiohttp.TraceConfig()
    config.on_request_redirect.append(_refuse_redirect)
    return config


class ProxyConnector(aiohttp.TCPConnector):
    """aiohttp's connector (WebSockets) that also owns the proxy's own HTTP pool."""

    def __init__(self, upstream: UpstreamClient, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.upstream = upstream

    async def close(self, *, abort_ssl: bool = False) -> None:
        await self.upstream.close()
        await super().close(abort_ssl=abort_ssl)


def make_session(settings: Settings, *, ssl_context: ssl.SSLContext | None = None,
                 **overrides: Any) -> aiohttp.ClientSession:
    """Call inside the running loop (lifespan). ``ssl_context`` decides whose certificates
    TLS origins must present: the system trust store unless given (tests pass their CA)."""
    resolver = CheckedResolver(settings.allow_private_origins)
    upstream = UpstreamClient(
        connect_timeout=settings.proxy_connect_timeout,
        read_timeout=settings.proxy_read_timeout,
        max_idle=settings.proxy_pool_size, resolver=resolver, ssl_context=ssl_context,
        head_limits=settings.head_limits,
    )
    # aiohttp carries only WebSockets, each holding its origin connection for its life: no
    # cap (limit=0), as nginx has none. Capped at the idle pool size, the handshake past it
    # waited, with no timeout, for another WebSocket to close.
    connector = ProxyConnector(
        upstream, limit=0, limit_per_host=0, ttl_dns_cache=10,
        resolver=resolver, keepalive_timeout=30,
        ssl=ssl_context if ssl_context is not None else True,
    )
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=settings.proxy_connect_timeout,
                                    sock_read=settings.proxy_read_timeout)
    limits = settings.head_limits
    return aiohttp.ClientSession(
        connector=connector, timeout=timeout, auto_decompress=False,
        # The WebSocket handshake's answer is held to the same head limits as the rest.
        max_line_size=limits.header_line, max_field_size=limits.header_line,
        max_headers=limits.headers,
        cookie_jar=aiohttp.DummyCookieJar(), trust_env=False,
        trace_configs=[_no_redirects()],
        skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
        **overrides,
    )


def upstream_client(session: aiohttp.ClientSession) -> UpstreamClient:
    """The hot-path client that ``make_session`` hung on ``session``."""
    connector = session.connector
    if not isinstance(connector, ProxyConnector):
        raise TypeError("the HTTP session was not made by router.upstream.make_session")
    return connector.upstream
