"""The one error type of the service and the one handler that renders it.

Body: ``{"code": "...", "message": "..."}`` plus optional fields (ARCHITECTURE.md).
"""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response


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


async def handle_http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 in our envelope rather than plain text."""
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    return JSONResponse({"code": code, "message": str(exc.detail)}, status_code=exc.status_code,
                        headers=exc.headers)


async def handle_unexpected(request: Request, exc: Exception) -> Response:
    # The traceback goes to the server log via Starlette's ServerErrorMiddleware;
    # the client learns only that it was our fault.
    return JSONResponse({"code": "internal_error", "message": "The service failed to handle "
                         "this request. It has been logged; retry later."}, status_code=500)


EXCEPTION_HANDLERS = {
    ApiError: handle_api_error,
    HTTPException: handle_http_exception,
    Exception: handle_unexpected,
}
