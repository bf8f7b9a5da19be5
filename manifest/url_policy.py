"""Which URLs the service will call on a developer's behalf: webhook URLs and runtime origins.

One module for both (spec 5.5, 4.11, 8 item 8), because they guard the same thing: a request
the service makes must reach the developer's own public server, never an address inside our
network, never the service itself. Checking happens in two steps:

1. ``check_webhook_url`` / ``check_runtime_origin``: the text alone. Scheme, shape, the name
   (no localhost, ``.local``, ``.internal``, single labels, odd IP spellings such as
   ``2130706433`` or ``0x7f.1`` that some resolvers read as addresses) and IP literals.
2. ``resolve_checked``: the name's DNS answers, at registration and again right before each
   connection. The caller then connects to exactly one of the returned addresses (sending the
   name as ``Host``/SNI), so a second lookup by the HTTP client cannot be steered elsewhere.

``allow_loopback`` is the dev/local switch (``SVCSRV_ALLOW_PRIVATE_ORIGINS``, refused by the
production settings): it admits plain HTTP, ``localhost`` and loopback or private addresses so
a developer can run receivers on their own machine. Link-local (cloud metadata), unspecified,
multicast and NAT64 addresses stay refused even then.

This package imports nothing internal (ARCHITECTURE.md); callers turn ``UrlRefused`` into the
service's error envelope.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

import dns.exception
import dns.resolver
import idna

from manifest.addresses import IPAddress, embedded_ipv4, is_public_address, parse_ip

MAX_URL_LENGTH = 2048
APPS_PROXY_WEBHOOK_PATH = "/api/svc/webhook"

# Suffixes that never name a developer's public server: RFC 6761/6762 special-use names,
# RFC 8375 home.arpa, and the private-use names resolvers in cloud networks answer for
# (``metadata.google.internal``, ``*.ec2.internal``). Each matches the name or a subdomain.
_INTERNAL_SUFFIXES = (
    "localhost", "local", "internal", "localdomain", "home.arpa", "lan", "intranet", "corp",
    "home", "private", "test", "invalid", "example", "onion", "arpa",
)
_LOOPBACK_NAMES = ("localhost",)
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)\Z")
# A label some resolvers read as a number: decimal, octal (leading 0) or 0x-hex.
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)\Z")


class UrlRefused(ValueError):
    """The URL may not be used. ``rule`` names the rule for tests and reports; ``code`` is the
    API error code; ``transient`` marks a DNS failure worth retrying (timeout, no server)."""

    def __init__(self, code: str, rule: str, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.rule = rule
        self.message = message
        self.transient = transient


class _PolicySettings(Protocol):
    """The fields of ``router.settings.Settings`` the policy reads (no import: see above)."""

    @property
    def service_hosts(self) -> tuple[str, ...]: ...
    @property
    def apps_domain(self) -> str: ...
    @property
    def allow_private_origins(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class UrlPolicy:
    service_hosts: frozenset[str]  # hostnames of the base, portal, console and docs URLs
    apps_domain: str  # e.g. "apps.localhost"; every <slug>.{apps_domain} is ours
    allow_loopback: bool  # dev/local only

    @classmethod
    def from_settings(cls, settings: _PolicySettings) -> UrlPolicy:
        return cls(service_hosts=frozenset(h.lower() for h in settings.service_hosts),
                   apps_domain=settings.apps_domain.lower().rstrip("."),
                   allow_loopback=settings.allow_private_origins)


@dataclass(frozen=True, slots=True)
class CheckedUrl:
    url: str  # as given (already validated; what is stored and shown)
    scheme: str
    host: str  # lower-case ASCII (IDNA) name, or the IP literal without brackets
    port: int
    path: str  # path and query, what goes on the request line; "/" at least
    ip_literal: bool
    apps_proxy_slug: str | None = None  # set for https://<slug>.{apps_domain}/api/svc/webhook
    refusal_code: str = "url_refused"  # the error code of later refusals (resolve_checked)

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


class Resolver(Protocol):
    def resolve(self, host: str) -> list[IPAddress]:
        """Every A and AAAA answer for ``host``; raises ``UrlRefused`` when there is none."""
        ...


class DnsResolver:
    """dnspython, A and AAAA. ``nameserver`` set: ask only that server (tests run one on
    loopback); unset: the system's resolv.conf."""

    def __init__(self, nameserver: str | None = None, port: int = 53,
                 timeout: float = 2.0) -> None:
        self._resolver = dns.resolver.Resolver(configure=nameserver is None)
        if nameserver is not None:
            self._resolver.nameservers = [nameserver]
            self._resolver.port = port
        self._resolver.lifetime = timeout
        self._resolver.cache = None  # every check asks again: that is the point of it

    def resolve(self, host: str) -> list[IPAddress]:
        found: list[IPAddress] = []
        transient = False
        for rdtype in ("A", "AAAA"):
            try:
                answer = self._resolver.resolve(host, rdtype, search=False)
            except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
                continue
            except (dns.exception.Timeout, dns.resolver.NoNameservers):
                transient = True
                continue
            for rr in answer:
                found.append(ipaddress.ip_address(rr.to_text()))
        if not found:
            if transient:
                raise UrlRefused("dns_unavailable", "dns_unavailable",
                                 f"{host}: no DNS answer in time; try again", transient=True)
            raise UrlRefused("url_does_not_resolve", "does_not_resolve",
                             f"{host} has no A or AAAA record")
        return found


def check_webhook_url(url: str, policy: UrlPolicy, *, app_slug: str,
                      runtime_active: bool) -> CheckedUrl:
    """A webhook URL for ``app_slug``, or ``UrlRefused`` (code ``webhook_url_invalid``)."""
    code = "webhook_url_invalid"
    checked = _parse(url, code, policy)
    apps = _apps_slug(checked.host, policy)
    if apps is not None:
        # Our own runtime proxy, only as the same app's proxied webhook route (spec 5.5).
        if apps != app_slug:
            raise UrlRefused(code, "other_app_host",
                             f"{checked.host} belongs to another app; use your own origin")
        if checked.path != APPS_PROXY_WEBHOOK_PATH:
            raise UrlRefused(code, "apps_proxy_path",
                             f"on {checked.host} only the path {APPS_PROXY_WEBHOOK_PATH} is "
                             "accepted")
        if not runtime_active:
            raise UrlRefused(code, "runtime_not_active",
                             "the runtime proxy URL is accepted once the runtime host is served "
                             "(verified, domain approved); "
                             "until then use your developer origin")
        return _replace_slug(checked, apps)
    _check_target(checked, code, policy)
    return checked


def check_runtime_origin(origin: str, policy: UrlPolicy) -> CheckedUrl:
    """A developer-owned runtime origin (``scheme://host[:port]``), or ``UrlRefused`` (code
    ``runtime_origin_invalid``)."""
    code = "runtime_origin_invalid"
    checked = _parse(origin, code, policy)
    rest = origin.strip().split("://", 1)[1]
    if "/" in rest.rstrip("/") or "?" in rest:
        raise UrlRefused(code, "not_an_origin",
                         "a runtime origin is scheme://host[:port] without a path or query")
    if _apps_slug(checked.host, policy) is not None or checked.host == policy.apps_domain:
        raise UrlRefused(code, "apps_domain",
                         "the runtime origin must be your own server, not the service's "
                         f"proxy domain {policy.apps_domain}")
    _check_target(checked, code, policy)
    return checked


def check_entry_url(url: str, policy: UrlPolicy, *, app_slug: str) -> CheckedUrl:
    """An app's Entry URL (spec 2.2: "developer-owned public URL"), or ``UrlRefused`` (code
    ``entry_url_invalid``). The service never fetches it, but the console and portal may
    link to it, so it gets the text rules of a runtime origin: http(s) only, public and
    https outside dev, never one of the service's hosts or another app's runtime host. The
    app's own runtime host is its address once served, so it is accepted."""
    code = "entry_url_invalid"
    checked = _parse(url, code, policy)
    apps = _apps_slug(checked.host, policy)
    if apps is not None:
        if apps != app_slug:
            raise UrlRefused(code, "other_app_host",
                             f"{checked.host} belongs to another app; use your own")
        return _replace_slug(checked, apps)
    _check_target(checked, code, policy)
    return checked


def resolve_checked(checked: CheckedUrl, policy: UrlPolicy,
                    resolver: Resolver) -> list[IPAddress]:
    """The addresses to connect to. Refused when any answer is not allowed: a name with one
    private answer is not a public server, and picking the public one would hide a
    misconfiguration that a later lookup could turn into a rebinding."""
    code = checked.refusal_code
    if checked.ip_literal:
        return [ipaddress.ip_address(checked.host)]
    if policy.allow_loopback and _is_loopback_name(checked.host):
        return [ipaddress.ip_address("127.0.0.1")]
    try:
        addresses = resolver.resolve(checked.host)
    except UrlRefused as exc:
        raise UrlRefused(code, exc.rule, exc.message, transient=exc.transient) from None
    for ip in addresses:
        if not _address_allowed(ip, policy):
            raise UrlRefused(code, "resolves_private",
                             f"{checked.host} resolves to {ip}, which is not a public address")
    return addresses


def _parse(url: str, code: str, policy: UrlPolicy) -> CheckedUrl:
    if not isinstance(url, str) or not url.strip():
        raise UrlRefused(code, "malformed", "give a URL")
    url = url.strip()
    if len(url) > MAX_URL_LENGTH:
        raise UrlRefused(code, "malformed", f"URLs are at most {MAX_URL_LENGTH} characters")
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F or c == "\\" for c in url):
        raise UrlRefused(code, "malformed", "the URL contains spaces, control characters or "
                                            "backslashes")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UrlRefused(code, "malformed", "the URL cannot be parsed") from None
    if parts.scheme not in ("https", "http"):
        raise UrlRefused(code, "https_required", "use an https:// URL")
    if parts.scheme == "http" and not policy.allow_loopback:
        raise UrlRefused(code, "https_required", "use an https:// URL; plain http is refused")
    if "@" in parts.netloc:
        raise UrlRefused(code, "userinfo", "credentials in the URL (user@host) are refused")
    if parts.fragment or url.endswith("#"):
        raise UrlRefused(code, "malformed", "a fragment (#...) is not part of a request")
    if "[" in parts.netloc:
        host, ip_literal = _ipv6_literal(parts.hostname or "", code), True
    else:
        host, ip_literal = _hostname_or_ipv4(parts.hostname or "", code)
    if port == 0:
        raise UrlRefused(code, "malformed", "port 0 is not a port")
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    default = 443 if parts.scheme == "https" else 80
    return CheckedUrl(url=url, scheme=parts.scheme, host=host,
                      port=port if port is not None else default, path=path,
                      ip_literal=ip_literal, refusal_code=code)


def _ipv6_literal(inner: str, code: str) -> str:
    if "%" in inner:
        raise UrlRefused(code, "ip_spelling", "IPv6 zone ids are refused")
    try:
        return str(ipaddress.IPv6Address(inner))
    except ValueError:
        raise UrlRefused(code, "malformed", f"[{inner}] is not an IPv6 address") from None


def _hostname_or_ipv4(host: str, code: str) -> tuple[str, bool]:
    if host.endswith("."):
        host = host[:-1]
    if not host:
        raise UrlRefused(code, "malformed", "the URL has no host")
    try:
        # UTS 46 mapping first: fullwidth and other compatibility characters become the
        # ASCII they stand for (a browser reads fullwidth "localhost" as localhost), so every
        # rule below sees what a resolver would see.
        host = idna.encode(host, uts46=True).decode("ascii")
    except idna.IDNAError:
        raise UrlRefused(code, "malformed", f"{host} is not a valid host name") from None
    labels = host.split(".")
    if _NUMERIC_LABEL.match(labels[-1]):
        # No top-level domain is numeric: this is an address. Only the plain dotted quad is
        # accepted; 2130706433, 0177.0.0.1, 0x7f.1 or 127.1 mean different things to
        # different parsers, and a check that reads them one way can be bypassed the other.
        ip = parse_ip(host)
        canonical = (ip is not None and ip.version == 4 and len(labels) == 4 and
                     all(len(x) == 1 or not x.startswith("0") for x in labels))
        if not canonical:
            raise UrlRefused(code, "ip_spelling",
                             f"{host} is not a plain dotted IPv4 address")
        return str(ip), True
    if any(not _LABEL.match(label) for label in labels):
        raise UrlRefused(code, "malformed", f"{host} is not a valid host name")
    return host, False


def _apps_slug(host: str, policy: UrlPolicy) -> str | None:
    suffix = "." + policy.apps_domain
    if host.endswith(suffix):
        return host[: -len(suffix)]
    return None


def _replace_slug(checked: CheckedUrl, slug: str) -> CheckedUrl:
    return CheckedUrl(url=checked.url, scheme=checked.scheme, host=checked.host,
                      port=checked.port, path=checked.path, ip_literal=False,
                      apps_proxy_slug=slug, refusal_code=checked.refusal_code)


def _check_target(checked: CheckedUrl, code: str, policy: UrlPolicy) -> None:
    host = checked.host
    if host in policy.service_hosts or host == policy.apps_domain:
        raise UrlRefused(code, "service_host",
                         f"{host} is one of the service's own hosts; use your own server")
    if checked.ip_literal:
        ip = ipaddress.ip_address(host)
        if not _address_allowed(ip, policy):
            raise UrlRefused(code, "private_address", f"{ip} is not a public address")
    elif not (policy.allow_loopback and _is_loopback_name(host)):
        for suffix in _INTERNAL_SUFFIXES:
            if host == suffix or host.endswith("." + suffix):
                raise UrlRefused(code, "internal_name",
                                 f"{host} is an internal name (.{suffix}); use a public domain")
        if "." not in host:
            raise UrlRefused(code, "single_label",
                             f"{host} is a single-label (internal) name; use a public domain")
    if checked.scheme == "http" and not is_local_target(checked):
        # The dev switch admits http only for servers on the developer's own machine or LAN.
        raise UrlRefused(code, "https_required",
                         "plain http is accepted for localhost and private addresses only")


def is_local_target(checked: CheckedUrl) -> bool:
    """Whether the URL names the developer's own machine or network by its text: a loopback
    name or a loopback or private address literal. Only the dev switch admits such a URL."""
    if checked.ip_literal:
        return not is_public_address(ipaddress.ip_address(checked.host))
    return _is_loopback_name(checked.host)


def _is_loopback_name(host: str) -> bool:
    return any(host == n or host.endswith("." + n) for n in _LOOPBACK_NAMES)


def _address_allowed(ip: IPAddress, policy: UrlPolicy) -> bool:
    if is_public_address(ip):
        return True
    if not policy.allow_loopback:
        return False
    inner = embedded_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else None
    target = inner or ip
    # Dev: the developer's own machine and LAN, never link-local (cloud metadata),
    # unspecified (0.0.0.0 reaches every local service), multicast or reserved.
    return ((target.is_loopback or target.is_private) and not target.is_link_local
            and not target.is_unspecified and not target.is_multicast
            and not target.is_reserved)
