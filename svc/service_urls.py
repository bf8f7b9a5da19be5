"""Where the service lives, as a developer's server sees it: the SDK's configuration.

Spec 4.11 lists the app's own variables (``SVC_APP_ID``, ``SVC_WEBHOOK_SECRET``, ...) but
not the service's addresses. A backend needs two of them: the payment API (``{base_url}``,
for backend calls with the ``zpk_`` key) and the portal (``{portal_url}``, which serves
the runtime modal script ``{portal_url}/sdk/svc-modal.js``). They are read here, in one
place, from ``SVC_API_URL`` (the variable the ``svc`` CLI already reads) and
``SVC_PORTAL_URL``; docs/decisions.md records why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

API_URL_ENV = "SVC_API_URL"
PORTAL_URL_ENV = "SVC_PORTAL_URL"
# What each variable names, for the "missing" message: the two are easy to swap.
_WHAT = {API_URL_ENV: "the service's payment API, e.g. https://api.example.com",
         PORTAL_URL_ENV: "the service's portal, e.g. https://portal.example.com"}


class ServiceUrlError(ValueError):
    """A service URL variable is missing or is not an http(s) origin; names the variable."""

    def __init__(self, variable: str, problem: str) -> None:
        self.variable = variable
        super().__init__(f"{variable}: {problem}")


@dataclass(frozen=True)
class ServiceUrls:
    api_url: str  # e.g. https://api.example.com, no trailing slash
    portal_url: str  # e.g. https://portal.example.com

    @property
    def modal_script_url(self) -> str:
        return f"{self.portal_url}/sdk/svc-modal.js"

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ServiceUrls:
        """Both URLs, or :class:`ServiceUrlError` for the first variable that is wrong."""
        return cls(api_url=service_origin(environ, API_URL_ENV),
                   portal_url=service_origin(environ, PORTAL_URL_ENV))


def service_origin(environ: Mapping[str, str], variable: str) -> str:
    value = environ.get(variable, "").strip()
    if not value:
        what = _WHAT.get(variable, "the service's URL, e.g. https://api.example.com")
        raise ServiceUrlError(variable, f"missing; set it to {what}")
    return checked_origin(value, variable)


def checked_origin(value: str, variable: str) -> str:
    """``scheme://host[:port]`` with no path, query, fragment or credentials."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise ServiceUrlError(variable, f"{value!r} is not a URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServiceUrlError(variable, f"{value!r} is not an http(s) URL")
    if parts.username or parts.password or parts.query or parts.fragment or \
            parts.path not in ("", "/"):
        raise ServiceUrlError(variable, f"{value!r} must be an origin only "
                              "(scheme://host[:port], no path, query or credentials)")
    return f"{parts.scheme}://{parts.netloc}"
