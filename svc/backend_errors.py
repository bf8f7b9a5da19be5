"""Error answers of the backend API and when to try again: pure decisions, no I/O.

A retry is safe because every POST the client sends carries one idempotency key for all
its attempts (the service answers a replay with the stored answer and never charges
twice), and the handoff POST moves no money. What is retried: no answer at all (a
transport error), 429, 502, 503, 504, and the service's ``service_unavailable`` (its
database is unreachable; nothing was written). Never any other 4xx, never a 500.
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass
from typing import Any

import httpx

from svc.digits import is_digits

RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})
RETRYABLE_CODES = frozenset({"service_unavailable", "rate_limited"})


class BackendError(Exception):
    """A non-2xx answer. ``code`` is the spec's identifier (``None`` when the answer was
    not the service's JSON, e.g. a proxy's HTML 502); ``body`` the parsed envelope.

    ``idempotency_key`` is the key the request carried (POSTs of orders and charges):
    retry later with it and the service cannot charge twice.
    """

    def __init__(self, status: int, code: str | None, message: str, body: dict[str, Any],
                 *, idempotency_key: str | None = None) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.body = body
        self.idempotency_key = idempotency_key
        self.retryable = is_retryable(status, code)
        super().__init__(f"{code or f'HTTP {status}'}: {message}")

    @property
    def retry_after(self) -> float | None:
        """Seconds the service asked to wait (``retryAfter`` of the envelope), if any."""
        value = self.body.get("retryAfter")
        return float(value) if isinstance(value, int | float) and value >= 0 else None


def is_retryable(status: int, code: str | None) -> bool:
    return status in RETRYABLE_STATUSES or code in RETRYABLE_CODES


def error_from(response: httpx.Response, idempotency_key: str | None,
               secret: str) -> BackendError:
    try:
        parsed = response.json()
    except ValueError:
        parsed = None
    body: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
    code = body.get("code") if isinstance(body.get("code"), str) else None
    message = body.get("message") if isinstance(body.get("message"), str) else None
    if message is None:
        message = (f"HTTP {response.status_code} from {response.request.url.host} that is not "
                   "the service's JSON; is the API URL right?")
    return BackendError(response.status_code, code, scrub(message, secret), body,
                        idempotency_key=idempotency_key)


def scrub(text: str, secret: str) -> str:
    """The API key never reaches an exception message, whatever echoed it."""
    return text.replace(secret, "zpk_…") if secret else text


@dataclass(frozen=True)
class RetryPolicy:
    """``retries`` more attempts after the first; waits grow from ``backoff`` and follow
    the service's Retry-After, never longer than ``max_delay`` seconds."""

    retries: int = 2
    backoff: float = 0.2
    max_delay: float = 5.0

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 0)."""
        return self.wait(attempt, retry_after(response) if response is not None else None)

    def wait(self, attempt: int, asked: float | None) -> float:
        """As :meth:`delay`, given the seconds the service asked for (``None``: none), for
        a caller that read the answer already (``svc keys create``)."""
        wait: float = self.backoff * float(2 ** attempt)
        if asked is not None:
            wait = max(wait, asked)
        return min(wait, self.max_delay)


def retry_after(response: httpx.Response) -> float | None:
    """Retry-After as seconds (delta or HTTP date); the envelope's ``retryAfter`` if no
    header; ``None`` if neither is usable."""
    header = response.headers.get("retry-after")
    if header is not None:
        header = header.strip()
        if is_digits(header):
            return float(header)
        try:
            when = email.utils.parsedate_to_datetime(header)
        except (TypeError, ValueError):
            when = None
        if when is not None:
            return max(0.0, when.timestamp() - time.time())
    try:
        body = response.json()
    except ValueError:
        return None
    value = body.get("retryAfter") if isinstance(body, dict) else None
    return float(value) if isinstance(value, int | float) and value >= 0 else None


def retryable_transport_error(error: httpx.TransportError) -> bool:
    """No answer came: the request may or may not have been handled, so only an
    idempotent request may go again. A bad URL scheme will not get better."""
    return not isinstance(error, httpx.UnsupportedProtocol)
