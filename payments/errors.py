"""The one error type of the service and the one handler that renders it.

Body: ``{"code": "...", "message": "..."}`` plus optional fields (ARCHITECTURE.md).
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.exc import InterfaceError, OperationalError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An error a client can act on: a stable ``code``, an HTTP status and a sentence."""

    def __init__(self, code: str, status: int, message: str, *, keep_changes: bool = False,
                 **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.message = message
        # Commit what the failing unit of work wrote (e.g. count a failed attempt).
        self.keep_changes = keep_changes
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.extra}


def error_response(error: ApiError, headers: dict[str, str] | None = None) -> JSONResponse:
    headers = dict(headers or {})
    retry_after = error.extra.get("retryAfter")
    if isinstance(retry_after, int):
        headers["retry-after"] = str(retry_after)
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


async def handle_api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc)


_HTTP_CODES = {
    400: "bad_request", 404: "not_found", 405: "method_not_allowed",
    413: "payload_too_large", 415: "unsupported_media_type",
}


_PATH_SHOWN = 200  # characters of the path a routing error repeats


def _routing_message(request: Request, exc: HTTPException) -> str:
    """Starlette's bare "Not Found" / "Method Not Allowed" say nothing of what was asked:
    a client with a wrong base URL (``…/api`` twice, the portal's host for the API's) is
    told the method and path that matched nothing on this host."""
    path = request.url.path
    if len(path) > _PATH_SHOWN:
        path = path[:_PATH_SHOWN] + "…"
    if exc.status_code == 404 and exc.detail == "Not Found":
        return (f"Nothing answers {request.method} {path} on this host: check the URL's "
                "host and path (the payment API is on the API host; its paths are in "
                "openapi.json).")
    if exc.status_code == 405 and exc.detail == "Method Not Allowed":
        return f"{request.method} is not allowed on {path}."
    return str(exc.detail)


async def handle_http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 in our envelope rather than plain text."""
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    return JSONResponse({"code": code, "message": _routing_message(request, exc)},
                        status_code=exc.status_code, headers=exc.headers)


async def handle_unexpected(request: Request, exc: Exception) -> Response:
    # The traceback goes to the server log via Starlette's ServerErrorMiddleware;
    # the client learns only that it was our fault.
    return JSONResponse({"code": "internal_error", "message": "The service failed to handle "
                         "this request. It has been logged; retry later."}, status_code=500)


# The database could not be reached or dropped the connection (a restart, a failover, a
# network cut): a transient state the client should retry, not our bug. The transaction
# did not commit, so a retry with the same idempotency key is safe.
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)
RETRY_AFTER_SECONDS = 2


def unavailable_error() -> ApiError:
    return ApiError("service_unavailable", 503, "The service cannot reach its database right "
                    "now; nothing was changed. Retry shortly with the same idempotency key.",
                    retryAfter=RETRY_AFTER_SECONDS)


async def handle_database_unavailable(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, DATABASE_UNAVAILABLE)
    log.warning("database unavailable for %s %s: %s", request.method, request.url.path,
                type(exc.orig).__name__ if exc.orig is not None else type(exc).__name__)
    return error_response(unavailable_error())


EXCEPTION_HANDLERS = {
    ApiError: handle_api_error,
    HTTPException: handle_http_exception,
    OperationalError: handle_database_unavailable,
    InterfaceError: handle_database_unavailable,
    Exception: handle_unexpected,
}
