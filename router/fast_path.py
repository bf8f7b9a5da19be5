"""Which runtime requests the HTTP protocol serves itself, skipping the ASGI request cycle.

Through ASGI every proxied request pays for uvicorn's scope and ``send`` framing, the
Host dispatch of :class:`router.app.Service`, an awaited cache lookup and the gate of
:class:`router.runtime_host.RuntimeHost` before :class:`router.proxy.HttpProxy` starts
(bench/proxy_bench.py, docs/decisions.md). The common request needs none of it: a runtime
host whose route is cached and open, no upgrade, not ``/svc-auth-return``, and no body or
one the protocol already holds whole (``router/fast_protocol.py``).
:meth:`FastPath.plan` recognises it from the parsed head with the same rules the ASGI path
applies (``HostTable.classify``, ``AppDirectory``, ``gate``, ``plan_request``), and
``router/fast_protocol.py`` hands it straight to :meth:`HttpProxy.exchange`. Anything
else gets ``None`` and goes through ASGI unchanged: a cache miss, a closed gate, a body
over the proxy's limit (the 413 page) or not framed by the Content-Length sent on, a
refused origin address, a host that is not a runtime.
"""

from __future__ import annotations

from router.auth_return_path import is_auth_return_path
from router.gating import RuntimeRoute
from router.headers import Headers, plan_request
from router.hosts import HostKind, HostTable
from router.origin import Origin
from router.proxy import HttpProxy
from router.resources import Resources
from router.settings import Settings
from router.turns import Turns

# Host header values remembered as runtime slugs; cleared when full, so a client
# inventing host names costs memory only up to this bound.
MAX_HOSTS = 4096

# (the app, its parsed origin, the headers planned for it)
FastRequest = tuple[RuntimeRoute, Origin, Headers]


class FastPath:
    def __init__(self, settings: Settings, table: HostTable, resources: Resources,
                 proxy: HttpProxy) -> None:
        self.proxy = proxy
        self._table = table
        self._resources = resources
        self._trusted = proxy.trusted
        self._max_request = settings.proxy_max_request_bytes
        self._slugs: dict[bytes, str] = {}
        self.taken = 0  # requests planned here (the tests and the benchmark read it)
        self.untasked = 0  # of which sent at once from the protocol, without a task
        # of which sent on a connection they opened (a task for the connect alone)
        self.opened = 0
        self.turns: Turns | None = None  # made by the first connection, in the loop

    def trusts(self, client_ip: str | None) -> bool:
        """Whether a peer's forwarding headers are believed; asked once per connection."""
        return self._trusted.trusts(client_ip)

    def plan(self, headers: Headers, path: str, client_ip: str | None, scheme: str,
             trusted_proxy: bool, body_length: int = 0) -> FastRequest | None:
        """The request to send to the origin, or None: let the ASGI path answer.

        ``headers`` are the client's (names lower-cased, as uvicorn gives them); ``path``
        is decoded as in the ASGI scope; ``body_length`` is the length of the body the
        caller holds whole (Content-Length framed it). The caller has ruled out upgrades,
        ``Expect: 100-continue`` and chunked bodies.
        """
        host = None
        for name, value in headers:
            if name == b"host":  # the first, as Service dispatches
                host = value
                break
        if host is None:
            return None
        slug = self._slug(host)
        directory = self._resources.directory
        if slug is None or directory is None:
            return None
        route = directory.cached(slug)
        if route is None or not route.decision.open:
            return None
        if is_auth_return_path(path):
            return None
        origin = self.proxy.origin_for(route)
        if origin is None or origin.ip_literal_refused:
            return None
        planned, declared, chunked = plan_request(
            headers, upstream_host=origin.host_bytes, client_ip=client_ip, scheme=scheme,
            trusted_proxy=trusted_proxy)
        length = declared or 0
        # The ASGI path answers a body over the limit (413), and one whose Content-Length
        # is not sent on (named in Connection): what it does there is its own.
        if chunked or length != body_length or length > self._max_request:
            return None
        self.taken += 1
        return route, origin, planned

    def _slug(self, host: bytes) -> str | None:
        slug = self._slugs.get(host)
        if slug is None:
            target = self._table.classify(host.decode("latin-1"))
            if target.kind is not HostKind.RUNTIME or target.slug is None:
                return None
            if len(self._slugs) >= MAX_HOSTS:
                self._slugs.clear()
            slug = self._slugs[host] = target.slug
        return slug
