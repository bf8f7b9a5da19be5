"""One error type and its envelope, ``{"code", "message"}`` plus fields, as the service's.

Failures of the service reach the page with the service's own code (``AUTHORIZATION_...``,
``needs_budget``...), because the recovery flow of spec 4.9 decides on those codes; the
service's 5xx and no answer at all become 502/503 with ``retryable: true``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from svc.backend import AnswerError, BackendError, ServiceUnreachable

log = logging.getLogger("reference_app")
MAX_BODY = 64 * 1024


class AppError(Exception):
    def __init__(self, code: str, status: int, message: str, **extra: Any) -> None:
        self.code = code
        self.status = status
        self.message = message
        self.extra = extra
        super().__init__(message)

    def response(self) -> JSONResponse:
        return JSONResponse({"code": self.code, "message": self.message, **self.extra},
                            status_code=self.status, headers={"cache-control": "no-store"})


def from_backend(error: BackendError | ServiceUnreachable | AnswerError) -> AppError:
    if isinstance(error, ServiceUnreachable):
        return AppError("service_unreachable", 503, "The payment service could not be "
                        "reached; try again.", retryable=True)
    if isinstance(error, AnswerError):
        return AppError("service_answer_invalid", 502, "The payment service's answer was not "
                        "understood; try again.", retryable=True)
    if error.status >= 500 or error.retryable:
        return AppError(error.code or "service_unavailable", 502 if error.status >= 500
                        else error.status, error.message, retryable=True)
    extra = {k: error.body[k] for k in ("budgetState", "remaining", "field", "scope")
             if k in error.body}
    return AppError(error.code or f"http_{error.status}", error.status, error.message,
                    retryable=False, **extra)


def store_unavailable(error: SQLAlchemyError) -> AppError:
    # The store is down: 5xx so the service retries the webhook (spec 6 rule 4); the
    # exception class only, the URL and statement may carry credentials.
    log.warning("fulfilment store unavailable: %s", type(error).__name__)
    return AppError("store_unavailable", 503, "The fulfilment store is unavailable; "
                    "try again.", retryable=True)


async def handle_app_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, AppError)
    return exc.response()


async def read_json(request: Request) -> dict[str, Any]:
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise AppError("unsupported_media_type", 415, "Send a JSON body (application/json).")
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise AppError("payload_too_large", 413, "The body is over 64 KiB.")
    try:
        body = json.loads(raw or b"{}")
    except (UnicodeDecodeError, ValueError):
        raise AppError("invalid_json", 400, "The body is not JSON.") from None
    if not isinstance(body, dict):
        raise AppError("invalid_json", 400, "The body must be a JSON object.")
    return body


def text_field(body: dict[str, Any], name: str, *, required: bool = True,
               max_length: int = 200, prefix: str | None = None) -> str | None:
    value = body.get(name)
    if value is None or value == "":
        if required:
            raise AppError("missing_field", 422, f"'{name}' is required.", field=name)
        return None
    if not isinstance(value, str) or len(value) > max_length or not value.isprintable() \
            or (prefix is not None and not value.startswith(prefix)):
        shape = f" starting {prefix}" if prefix else ""
        raise AppError("invalid_field", 422, f"'{name}' must be a string{shape} of at most "
                       f"{max_length} characters.", field=name)
    return value
