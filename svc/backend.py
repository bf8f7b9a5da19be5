"""The backend API a developer's server calls with a ``zpk_`` key (spec 4.2, 5.1).

Separate from :class:`svc.client.DeveloperClient` on purpose: a CLI grant never goes
here and an API key never goes to the developer API (spec 5.3 item 4).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import httpx

from svc import __version__
from svc.client import DEFAULT_TIMEOUT, ServiceUnreachable, decode_answer


class BackendClient:
    def __init__(self, api_url: str, api_key: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.api_url = api_url.rstrip("/")
        self._http = httpx.Client(headers={
            "user-agent": f"svc/{__version__}", "accept": "application/json",
            "authorization": f"Bearer {api_key}"}, timeout=timeout, follow_redirects=False)

    def __enter__(self) -> BackendClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._http.close()

    def create_order(self, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.api_url}/api/orders"
        try:
            response = self._http.post(url, json=body)
        except httpx.TransportError as exc:
            raise ServiceUnreachable(f"Could not reach {self.api_url}: {exc or type(exc).__name__}"
                                     ) from exc
        return decode_answer(response)
