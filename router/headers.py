"""Header policy of the runtime proxy: plain functions over ASGI header lists.

ASGI gives header names lower-cased as bytes; upstream (aiohttp) hands raw bytes
back. Everything here works on ``list[tuple[bytes, bytes]]`` and does no I/O.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

Headers = list[tuple[bytes, bytes]]

# RFC 9110 section 7.6.1 plus the de-facto hop-by-hop names proxies strip.
HOP_BY_HOP = frozenset({
    b"connection", b"proxy-connection", b"keep-alive", b"te", b"trailer",
    b"transfer-encoding", b"upgrade", b"proxy-authenticate", b"proxy-authorization",
})

# Runtime state must not live in cookies the service domain would carry (spec 1.2 rule 2, 5.7).
_REQUEST_DROP = frozenset({b"cookie", b"host"})
_RESPONSE_DROP = frozenset({b"set-cookie", b"set-cookie2"})
# Client-supplied forwarding claims; believed only from trusted proxies.
_FORWARDING = frozenset({b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host",
                         b"x-forwarded-port", b"x-real-ip", b"forwarded"})


def connection_named(headers: Iterable[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """Header names listed in ``Connection`` (they are hop-by-hop for this hop only)."""
    names: set[bytes] = set()
    for name, value in headers:
        if name.lower() == b"connection":
            names.update(t.strip().lower() for t in value.split(b",") if t.strip())
    return frozenset(names)


def _without(headers: Iterable[tuple[bytes, bytes]], drop: frozenset[bytes]) -> Headers:
    return [(n, v) for n, v in headers if n.lower() not in drop]


def is_trusted(client_ip: str | None,
               trusted: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    if not client_ip or not trusted:
        return False
    try:
        ip = ipaddress.ip_address(client_ip)
    except ValueError:
        return False
    return any(ip in net for net in trusted)


def _first(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    for n, v in headers:
        if n == name:
            return v
    return None


def upstream_request_headers(
    headers: Sequence[tuple[bytes, bytes]],
    *,
    upstream_host: bytes,
    client_ip: str | None,
    scheme: str,
    trusted_proxy: bool,
    extra_drop: frozenset[bytes] = frozenset(),
) -> Headers:
    """What the origin receives: our forwarding headers, no cookies, no hop-by-hop."""
    drop = HOP_BY_HOP | _REQUEST_DROP | connection_named(headers) | extra_drop
    kept = _without(headers, drop | _FORWARDING)
    client = (client_ip or "").encode()
    host = _first(headers, b"host") or b""
    if trusted_proxy:
        prior_for = [v for n, v in headers if n == b"x-forwarded-for"]
        forwarded_for = b", ".join([*prior_for, client]) if client else b", ".join(prior_for)
        proto = _first(headers, b"x-forwarded-proto") or scheme.encode()
        forwarded_host = _first(headers, b"x-forwarded-host") or host
        passthrough = [(n, v) for n, v in headers
                       if n in (b"forwarded", b"x-forwarded-port", b"x-real-ip")]
        kept.extend(passthrough)
    else:
        forwarded_for, proto, forwarded_host = client, scheme.encode(), host
    kept.append((b"host", upstream_host))
    if forwarded_for:
        kept.append((b"x-forwarded-for", forwarded_for))
    kept.append((b"x-forwarded-proto", proto))
    if forwarded_host:
        kept.append((b"x-forwarded-host", forwarded_host))
    return kept


def downstream_response_headers(headers: Iterable[tuple[bytes, bytes]]) -> Headers:
    """What the browser receives: the origin's headers less hop-by-hop and cookies.

    ``Content-Length`` and ``Content-Encoding`` pass through untouched: the body is
    relayed byte for byte, never decoded.
    """
    headers = list(headers)
    drop = HOP_BY_HOP | _RESPONSE_DROP | connection_named(headers)
    return [(n.lower(), v) for n, v in headers if n.lower() not in drop]


def content_length(headers: Iterable[tuple[bytes, bytes]]) -> int | None:
    raw = _first(((n.lower(), v) for n, v in headers), b"content-length")
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if value >= 0 else None
