"""Which part of the service a ``Host`` header addresses: a pure decision."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from payments.digits import is_digits
from payments.slugs import is_valid_slug
from router.settings import Settings


class HostKind(Enum):
    API = "api"
    PORTAL = "portal"
    CONSOLE = "console"
    DOCS = "docs"
    RUNTIME = "runtime"
    LEGACY_LAUNCH = "legacy_launch"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class HostTarget:
    kind: HostKind
    slug: str | None = None


UNKNOWN = HostTarget(HostKind.UNKNOWN)


def strip_port(host: str) -> str:
    """``"Demo.Apps.localhost:8000"`` -> ``"demo.apps.localhost"``; IPv6 literals kept whole."""
    host = host.strip().lower()
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    name, _, port = host.rpartition(":")
    if name and is_digits(port):
        host = name
    return host.rstrip(".")


class HostTable:
    """Maps host names to targets; built once from settings."""

    def __init__(self, settings: Settings) -> None:
        self._exact = {
            settings.api_host: HostTarget(HostKind.API),
            settings.portal_host: HostTarget(HostKind.PORTAL),
            settings.console_host: HostTarget(HostKind.CONSOLE),
            settings.docs_host: HostTarget(HostKind.DOCS),
        }
        if settings.legacy_launch_host:
            legacy = settings.legacy_launch_host.lower()
            self._exact.setdefault(legacy, HostTarget(HostKind.LEGACY_LAUNCH))
        self._apps_suffix = "." + settings.apps_domain.lower()

    def classify(self, host_header: str | None) -> HostTarget:
        if not host_header:
            return UNKNOWN
        host = strip_port(host_header)
        exact = self._exact.get(host)
        if exact is not None:
            return exact
        if host.endswith(self._apps_suffix):
            slug = host[: -len(self._apps_suffix)]
            # exactly one label: `a.b.apps.example` is nobody's runtime
            if "." not in slug and is_valid_slug(slug):
                return HostTarget(HostKind.RUNTIME, slug)
        return UNKNOWN
