"""Header policy of the runtime proxy: plain functions over ASGI header lists.

ASGI gives request header names lower-cased as bytes (the ASGI spec requires it, and the
policy below relies on it); origins send names in any case. Everything here works on
``list[tuple[bytes, bytes]]`` and does no I/O. The proxy calls :func:`plan_request` and
:func:`plan_response`, each one pass over the headers (bench/proxy_bench.py: the policy
is on the hot path of every proxied request); the other functions are the same rules
piecewise.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

Headers = list[tuple[bytes, bytes]]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Peer addresses whose trust is remembered (TrustedProxies); a few hundred KB when full.
MAX_PEERS = 4096

# RFC 9110 section 7.6.1 plus the de-facto hop-by-hop names proxies strip.
HOP_BY_HOP = frozenset({
    b"connection", b"proxy-connection", b"keep-alive", b"te", b"trailer",
    b"transfer-encoding", b"upgrade", b"proxy-authenticate", b"proxy-authorization",
})

# Runtime state must not live in cookies the service domain would carry (spec 1.2 rule 2, 5.7).
_REQUEST_DROP = frozenset({b"cookie", b"host"})
# Answers' instructions to the proxy in front of us: nginx (deploy/nginx, the tested
# cluster) acts on these in what it relays unless told not to. From a runtime they would
# steer the edge every app shares: an internal redirect to a path of the app's choosing, an
# answer buffered whole to nginx's disk (up to 1 GiB each) where the configs stream them
# (docs/decisions.md). Our own hosts send none.
EDGE_CONTROLS = frozenset({b"x-accel-redirect", b"x-accel-buffering", b"x-accel-limit-rate",
                           b"x-accel-expires", b"x-accel-charset"})
# What only the edge may say of a runtime's host name, ``<slug>.{apps_domain}``: the name,
# its certificate and its ports are ours. An origin's Alt-Svc has browsers remember an
# alternative service for the name (24 h by default; persist=1 keeps it across networks)
# and try their next connections there, a port of the edge's address or another host of
# the origin's choosing; or forget the edge's own (``clear``). docs/decisions.md.
EDGE_ADVERTS = frozenset({b"alt-svc"})
_RESPONSE_DROP = frozenset({b"set-cookie", b"set-cookie2"}) | EDGE_CONTROLS | EDGE_ADVERTS
# Clear-Site-Data "cookies" (and "*", every type) clears the cookies of the response's whole
# registrable domain, not its origin's (W3C Clear Site Data; Chromium and Firefox do so):
# from a runtime host it would sign visitors out of the portal and the console. Only the
# types a browser clears for the origin alone pass; the rest, unknown ones too, are dropped
# (docs/decisions.md). Browsers match each type as written, quotes and case included.
_SITE_DATA = b"clear-site-data"
_SITE_DATA_OWN = frozenset({b'"cache"', b'"storage"', b'"executionContexts"',
                            b'"clientHints"', b'"prefetchCache"', b'"prerenderCache"'})
# Forwarding claims: what an earlier proxy says of the client's address, scheme, host, port
# or path. Frameworks that trust us as their proxy read them, so a client's own would pass
# for ours. The names beyond the three we write are those popular frameworks and
# libraries read (docs/router.md).
# Written by us; from a trusted proxy, extended (the chain) or believed (proto, host): the
# three a proxy in front must set, and the ones docs/deploy.md's nginx sets.
_FORWARDING_OURS = frozenset({b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host"})
# Dropped whoever sends them, a trusted proxy too: a stock proxy (nginx) passes a client's
# own on unless told to clear each one, so "the proxy vouches for them" held for none of
# ours (deploy walk 25). The origin reads the address from our X-Forwarded-For instead.
# A named list, not every x-forwarded-* name: a set lookup is all the policy costs a
# header on the hot path. Public: the nginx configs' clearing lines are checked against it.
FOREIGN_FORWARDING = frozenset({
    b"forwarded",
    # scheme
    b"x-forwarded-ssl", b"x-forwarded-scheme", b"x-forwarded-protocol", b"front-end-https",
    b"x-url-scheme",
    # host, port, path prefix
    b"x-forwarded-port", b"x-forwarded-server", b"x-forwarded-prefix", b"x-forwarded-path",
    # the path itself, as a rewriting proxy saw it: an origin routing or authorizing on
    # one would serve another path than the one we checked and sent
    b"x-original-url", b"x-rewrite-url", b"x-original-uri", b"x-forwarded-uri",
    # the client's address
    b"x-forwarded", b"forwarded-for", b"x-original-forwarded-for", b"x-real-ip",
    b"client-ip", b"x-client-ip", b"true-client-ip", b"cf-connecting-ip",
    b"fastly-client-ip", b"x-cluster-client-ip",
})
_FORWARDING = _FORWARDING_OURS | FOREIGN_FORWARDING



def underscored(names: Iterable[bytes]) -> frozenset[bytes]:
    """Every spelling of ``names`` with some of their dashes written as underscores."""
    found: set[bytes] = set()
    for name in names:
        parts = name.split(b"-")
        spellings = {parts[0]}
        for part in parts[1:]:
            spellings = {head + joint + part for head in spellings for joint in (b"-", b"_")}
        found |= spellings - {name}
    return frozenset(found)


# Names the one-pass planners look at; every other header is kept as it is. The request's
# include the underscore spellings of the names it drops or writes, so those are dropped
# too, at no cost per header: servers that build a CGI environ (Puma before 6.4.3,
# gunicorn before 22) read X_Forwarded_For as X-Forwarded-For (CVE-2024-45614) and
# Transfer_Encoding as the framing. nginx drops every name with an underscore by default.
_REQUEST_POLICY = HOP_BY_HOP | _REQUEST_DROP | _FORWARDING | {b"content-length"}
_REQUEST_NOTICED = _REQUEST_POLICY | underscored(_REQUEST_POLICY)
_RESPONSE_NOTICED = HOP_BY_HOP | _RESPONSE_DROP | {b"content-length", _SITE_DATA}
# What a Connection header may list without a second pass: names already dropped, or
# tokens that name no header at all.
_REQUEST_SETTLED = HOP_BY_HOP | _REQUEST_DROP | _FORWARDING | {b"close"}
_RESPONSE_SETTLED = HOP_BY_HOP | _RESPONSE_DROP | {b"close"}
# The usual Connection values, which name no header: no need to split them.
_PLAIN_CONNECTION = frozenset({b"keep-alive", b"close"})


# Plain tuples, not NamedTuples: building one of those costs more than the rest of a plan.
# (headers for the origin, Content-Length the client declared, the client sent
# Transfer-Encoding: a body of unknown length)
RequestPlan = tuple[Headers, int | None, bool]
# (headers for the browser, Content-Length the origin declared)
ResponsePlan = tuple[Headers, int | None]


def _tokens(value: bytes) -> set[bytes]:
    return {t.strip().lower() for t in value.split(b",") if t.strip()}


def _length(raw: bytes) -> int | None:
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if value >= 0 else None


def own_site_data(value: bytes) -> bytes | None:
    """A ``Clear-Site-Data`` value less the types that reach past the origin (cookies);
    None when none is left."""
    kept = [token for token in (t.strip() for t in value.split(b","))
            if token in _SITE_DATA_OWN]
    return b", ".join(kept) if kept else None


def connection_named(headers: Iterable[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """Header names listed in ``Connection`` (they are hop-by-hop for this hop only)."""
    names: set[bytes] = set()
    for name, value in headers:
        if name.lower() == b"connection":
            names |= _tokens(value)
    return frozenset(names)


def is_trusted(client_ip: str | None, trusted: Sequence[Network]) -> bool:
    if not client_ip or not trusted:
        return False
    try:
        ip = ipaddress.ip_address(client_ip)
    except ValueError:
        return False
    # An IPv4 peer of a socket listening on IPv6 ("::") is seen mapped, ::ffff:a.b.c.d: the
    # same peer, so a network written either way holds it. (Only the kernel writes a peer's
    # address: no client can choose to appear mapped.)
    if isinstance(ip, ipaddress.IPv6Address):
        other: IPAddress | None = ip.ipv4_mapped
    else:
        other = ipaddress.IPv6Address(f"::ffff:{ip}")
    return any(ip in net or (other is not None and other in net) for net in trusted)


class TrustedProxies:
    """:func:`is_trusted` for one setting, its answers remembered by peer address.

    It is asked for every new connection (and every request on uvicorn's path). Parsing
    the address took 2 to 4 us (IPv4), 4 to 8 (IPv6), of the 112 to 117 a request on a
    new connection costs in all (bench/connection_cpu.py); a remembered answer takes
    0.05. The peers asking are mostly the same few: the proxy in front, clients coming
    back. Cleared when full, so many distinct peers cost memory only up to ``MAX_PEERS``
    answers, and a parse each, as before.
    """

    def __init__(self, trusted: Sequence[Network]) -> None:
        self._trusted = tuple(trusted)
        self._answers: dict[str, bool] = {}

    def trusts(self, client_ip: str | None) -> bool:
        if not client_ip or not self._trusted:  # no proxies set: nothing to parse
            return False
        answer = self._answers.get(client_ip)
        if answer is None:
            if len(self._answers) >= MAX_PEERS:
                self._answers.clear()
            answer = self._answers[client_ip] = is_trusted(client_ip, self._trusted)
        return answer

    def __len__(self) -> int:
        """Answers remembered (never more than ``MAX_PEERS``)."""
        return len(self._answers)


def plan_request(
    headers: Iterable[tuple[bytes, bytes]],
    *,
    upstream_host: bytes,
    client_ip: str | None,
    scheme: str,
    trusted_proxy: bool,
    extra_drop: frozenset[bytes] = frozenset(),
) -> RequestPlan:
    """Our forwarding headers, no cookies, no hop-by-hop; one pass over ``headers``."""
    noticed = _REQUEST_NOTICED | extra_drop if extra_drop else _REQUEST_NOTICED
    kept: Headers = []
    listed: set[bytes] | None = None
    host = length = None
    chunked = False
    prior_for: list[bytes] = []
    proto = forwarded_host = None
    for item in headers:
        name = item[0]
        if name not in noticed:
            kept.append(item)
        elif name == b"host":
            host = item[1] if host is None else host
        elif name == b"content-length":
            kept.append(item)
            length = _length(item[1]) if length is None else length
        elif name == b"connection" and item[1].lower() not in _PLAIN_CONNECTION:
            listed = _tokens(item[1]) | (listed or set())
        elif name == b"transfer-encoding":
            chunked = True
        elif trusted_proxy and name in _FORWARDING_OURS:
            if name == b"x-forwarded-for":
                prior_for.append(item[1])
            elif name == b"x-forwarded-proto":
                proto = item[1] if proto is None else proto
            else:
                forwarded_host = item[1] if forwarded_host is None else forwarded_host
        # every other forwarding claim (FOREIGN_FORWARDING, anyone's) is dropped here
    if listed is not None and not listed <= _REQUEST_SETTLED:
        kept = [item for item in kept if item[0] not in listed]
        if b"content-length" in listed:
            length = None
    client = (client_ip or "").encode()
    if trusted_proxy:
        forwarded_for = b", ".join([*prior_for, client]) if client else b", ".join(prior_for)
        proto = proto or scheme.encode()
        forwarded_host = forwarded_host or host
    else:
        forwarded_for, proto, forwarded_host = client, scheme.encode(), host
    kept.append((b"host", upstream_host))
    if forwarded_for:
        kept.append((b"x-forwarded-for", forwarded_for))
    kept.append((b"x-forwarded-proto", proto))
    if forwarded_host:
        kept.append((b"x-forwarded-host", forwarded_host))
    return kept, length, chunked


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
    return plan_request(headers, upstream_host=upstream_host, client_ip=client_ip,
                        scheme=scheme, trusted_proxy=trusted_proxy,
                        extra_drop=extra_drop)[0]


def plan_response(headers: Iterable[tuple[bytes, bytes]]) -> ResponsePlan:
    """The origin's headers less hop-by-hop, cookies (``Set-Cookie``, and
    ``Clear-Site-Data`` of cookies) and what is the edge's to say (``EDGE_CONTROLS``,
    ``EDGE_ADVERTS``), names lower-cased; one pass.

    ``Content-Length`` and ``Content-Encoding`` pass through untouched: the body is
    relayed byte for byte, never decoded.
    """
    kept: Headers = []
    listed: set[bytes] | None = None
    length = None
    seen_length = False
    for name, value in headers:
        name = name.lower()
        if name not in _RESPONSE_NOTICED:
            kept.append((name, value))
        elif name == b"content-length":
            kept.append((name, value))
            if not seen_length:
                seen_length, length = True, _length(value)
        elif name == b"connection" and value.lower() not in _PLAIN_CONNECTION:
            listed = _tokens(value) | (listed or set())
        elif name == _SITE_DATA:
            own = own_site_data(value)
            if own is not None:
                kept.append((name, own))
    if listed is not None and not listed <= _RESPONSE_SETTLED:
        kept = [item for item in kept if item[0] not in listed]
        if b"content-length" in listed:
            length = None
    return kept, length


def downstream_response_headers(headers: Iterable[tuple[bytes, bytes]]) -> Headers:
    """What the browser receives: the origin's headers less hop-by-hop and cookies."""
    return plan_response(headers)[0]


def content_length(headers: Iterable[tuple[bytes, bytes]]) -> int | None:
    for name, value in headers:
        if name.lower() == b"content-length":
            return _length(value)
    return None
