"""The developer API over HTTP (spec 4.10, 5.3): the SDK the ``svc`` CLI is built on.

Requests go to ``api_url`` verbatim; the service tells its hosts apart by the ``Host``
header, so the URL must name the API host. Every failure is one of two exceptions:
:class:`ApiFailure` (the service answered with an error) or :class:`ServiceUnreachable`.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from svc import __version__
from svc.backend_errors import retry_after
from svc.loopback import LoopbackNames
from svc.sent import Recorded
from svc.trace import Traced

DEVELOPER = "/api/developer"
DEFAULT_TIMEOUT = 15.0


class ApiFailure(Exception):
    """An error answer; ``code`` and ``message`` come from the service's envelope."""

    def __init__(self, status: int, body: dict[str, Any], *,
                 retry_after: float | None = None) -> None:
        self.status = status
        self.body = body
        # Seconds the service asked to wait before a retry (Retry-After), if it said.
        self.retry_after = retry_after
        self.code = str(body.get("code") or f"http_{status}")
        self.message = str(body.get("message") or f"The service answered HTTP {status}.")
        # Per-field problems (``{path, code, message}``), e.g. each JSON path of a config.
        self.errors = [{k: str(e.get(k, "")) for k in ("path", "code", "message")}
                       for e in body.get("errors") or [] if isinstance(e, dict)]
        super().__init__(f"{self.code}: {self.message}")


class ServiceUnreachable(Exception):
    """No HTTP answer at all: refused, timed out, name not found, TLS failure.

    ``idempotency_key`` is set by the backend client when the request carried one: the
    request may have been handled, so retry it with that very key.
    """

    idempotency_key: str | None = None


class DeveloperClient:
    def __init__(self, api_url: str, token: str | None = None, *,
                 timeout: float = DEFAULT_TIMEOUT,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.api_url = api_url.rstrip("/")
        headers = {"user-agent": f"svc/{__version__}", "accept": "application/json"}
        if token:
            headers["authorization"] = f"Bearer {token}"
        self._http = httpx.Client(headers=headers, timeout=timeout,
                                  transport=Traced(Recorded(LoopbackNames(transport))),
                                  follow_redirects=False)

    def __enter__(self) -> DeveloperClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        url = f"{self.api_url}{DEVELOPER}{path}"
        try:
            response = self._http.request(method, url, json=body)
        except httpx.TransportError as exc:
            raise ServiceUnreachable(f"Could not reach {self.api_url}: {exc or type(exc).__name__}"
                                     ) from exc
        return decode_answer(response)

    # Sign-in (device authorization, spec 5.3)

    def start_sign_in(self, app: str | None, scopes: list[str] | None,
                      ttl_seconds: int | None) -> dict[str, Any]:
        body: dict[str, Any] = {"app": app, "scopes": scopes, "ttlSeconds": ttl_seconds}
        return self.call("POST", "/cli/auth-requests",
                         {k: v for k, v in body.items() if v is not None})

    def redeem(self, device_code: str) -> dict[str, Any]:
        return self.call("POST", "/cli/token", {"deviceCode": device_code})

    def grant(self) -> dict[str, Any]:
        return self.call("GET", "/cli/grant")

    def revoke_grant(self) -> dict[str, Any]:
        return self.call("DELETE", "/cli/grant")

    # Apps and keys

    def app(self, app: str) -> dict[str, Any]:
        return self.call("GET", f"/apps/{_segment(app)}")

    def keys(self, app: str) -> dict[str, Any]:
        return self.call("GET", f"/apps/{_segment(app)}/keys")


def _segment(value: str) -> str:
    return quote(value, safe="")


def decode_answer(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {"code": f"http_{response.status_code}",
                "message": f"Unexpected answer from {response.request.url} (HTTP "
                           f"{response.status_code}, not the service's JSON); is the API URL "
                           "right?"}
        raise ApiFailure(response.status_code, body, retry_after=retry_after(response))
    if response.is_error:
        raise ApiFailure(response.status_code, body, retry_after=retry_after(response))
    return body
