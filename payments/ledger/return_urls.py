"""Which return URLs an authorization may go back to (spec 5.5), as a pure decision."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from payments.errors import ApiError


@dataclass(frozen=True)
class ReturnTarget:
    url: str
    audience: str  # the origin allowed to exchange the summary code
    kind: str  # "hosted_entry" | "runtime" | "local_dev"


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    port = "" if parts.port in (None, default) else f":{parts.port}"
    return f"{parts.scheme}://{(parts.hostname or '').lower()}{port}"


def check_return_url(url: str, *, slug: str, portal_url: str, runtime_url: str,
                     runtime_active: bool) -> ReturnTarget:
    """``{portal_url}/<slug>``; ``<runtime>/<path>`` once the runtime host is served; or
    ``http://localhost|127.0.0.1:<port>/<slug>/...`` for local development."""
    # Checked on the string as sent, before parsing: urlsplit drops tabs and newlines (as
    # browsers do), so "/de<LF>mo" would pass as the hosted entry "/demo" while the string
    # kept, redirected to and signed in the owner proof's "Return:" line is another one,
    # and a line break there writes extra lines into the text the wallet shows.
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        raise _refused(url)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError:
        raise _refused(url) from None
    if parts.username or parts.password or parts.fragment or "\\" in url:
        raise _refused(url)
    origin = origin_of(url)
    if origin == origin_of(portal_url) and parts.path.rstrip("/") == f"/{slug}":
        return ReturnTarget(url, origin, "hosted_entry")
    if origin == origin_of(runtime_url) and parts.path.startswith("/"):
        if not runtime_active:
            raise ApiError("return_url_runtime_inactive", 422, "This app's runtime host is "
                           "not served yet (it needs a passing verification and an approved "
                           "domain); return to the hosted entry instead.")
        return ReturnTarget(url, origin, "runtime")
    local = parts.scheme == "http" and parts.hostname in ("localhost", "127.0.0.1")
    # A port must be named, and port 0 names no server: it cannot be listened on.
    if local and parts.port and parts.path.split("/")[1:2] == [slug]:
        return ReturnTarget(url, origin, "local_dev")
    raise _refused(url)


def _refused(url: str) -> ApiError:
    return ApiError("return_url_not_allowed", 422, "The return URL must be the app's hosted "
                    "entry, its runtime host, or a localhost URL whose first path segment is "
                    "the app slug.", returnUrl=url[:300])
