"""Reading requests safely: bounded JSON bodies and typed fields, errors in the envelope."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.requests import Request

from payments.digits import parse_digits
from payments.errors import ApiError

MAX_JSON_BYTES = 64 * 1024


async def read_json(request: Request, max_bytes: int = MAX_JSON_BYTES) -> dict[str, Any]:
    """The request's JSON object, or an :class:`ApiError` that says what is wrong."""
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise ApiError("unsupported_media_type", 415, "Send the body as application/json.")
    declared = parse_digits(request.headers.get("content-length", ""), 20)
    if declared is not None and declared > max_bytes:
        raise ApiError("payload_too_large", 413, f"The body is over {max_bytes} bytes.")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            raise ApiError("payload_too_large", 413, f"The body is over {max_bytes} bytes.")
    try:
        value = json.loads(body)
    except ValueError:  # also a number of more than 4300 digits, which json.loads refuses
        raise ApiError("invalid_json", 400, "The body is not valid JSON.") from None
    if not isinstance(value, dict):
        raise ApiError("invalid_json", 400, "The body must be a JSON object.")
    return value


async def json_after_auth(request: Request,
                          max_bytes: int = MAX_JSON_BYTES) -> Callable[[], dict[str, Any]]:
    """The request's JSON object, given by the returned function once the caller has
    authenticated the request: a body that cannot be read is refused only then, so a
    missing or wrong key is answered 401 whatever the body, and nothing about what the
    endpoint expects is told to a caller who may not use it."""
    try:
        body = await read_json(request, max_bytes)
    except ApiError as error:
        refused = error

        def refuse() -> dict[str, Any]:
            raise refused
        return refuse
    return lambda: body


def field_str(body: dict[str, Any], name: str, *, required: bool = True, max_length: int = 500,
              default: str | None = None) -> str | None:
    value = body.get(name)
    if value is None:
        if required:
            raise ApiError("missing_field", 422, f"'{name}' is required.", field=name)
        return default
    if not isinstance(value, str):
        raise ApiError("invalid_field", 422, f"'{name}' must be a string.", field=name)
    if "\x00" in value:  # PostgreSQL text cannot hold NUL, and no field of ours needs it
        raise ApiError("invalid_field", 422, f"'{name}' contains a NUL character.", field=name)
    if len(value) > max_length:
        raise ApiError("invalid_field", 422, f"'{name}' is longer than {max_length} characters.",
                       field=name)
    return value


def required_str(body: dict[str, Any], name: str, max_length: int = 500) -> str:
    value = field_str(body, name, max_length=max_length)
    assert value is not None
    return value


MAX_PAGE = 200  # the most rows one list answer holds


def page_size(raw: str | None, default: int = 50) -> int:
    """A list's ``limit`` query parameter: 1 to MAX_PAGE, ``default`` when absent."""
    if raw is None:
        return default
    limit = parse_digits(raw, 3)
    if limit is None or not 1 <= limit <= MAX_PAGE:
        raise ApiError("invalid_field", 422, f"'limit' must be 1 to {MAX_PAGE}.", field="limit")
    return limit


def field_str_list(body: dict[str, Any], name: str, *, max_items: int = 50) -> list[str] | None:
    value = body.get(name)
    if value is None:
        return None
    if (not isinstance(value, list) or len(value) > max_items
            or not all(isinstance(v, str) and len(v) <= 200 for v in value)):
        raise ApiError("invalid_field", 422, f"'{name}' must be a list of strings.", field=name)
    return list(value)


def field_int(body: dict[str, Any], name: str, *, minimum: int | None = None,
              maximum: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError("invalid_field", 422, f"'{name}' must be an integer.", field=name)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ApiError("invalid_field", 422, f"'{name}' is out of range.", field=name)
    return value


def atomic_amount(value: Any, name: str) -> int:
    """An amount in atomic units: a non-negative integer string (or integer) on the wire."""
    if isinstance(value, bool):
        raise ApiError("invalid_amount", 422, f"'{name}' must be an integer string.", field=name)
    amount = value if isinstance(value, int) else (
        parse_digits(value, 30) if isinstance(value, str) else None)
    if amount is None:
        raise ApiError("invalid_amount", 422, f"'{name}' must be a whole number of atomic units "
                       "(e.g. \"10000\" for 0.01 USDC).", field=name)
    if amount < 0 or amount >= 2**63:
        raise ApiError("invalid_amount", 422, f"'{name}' is out of range.", field=name)
    return amount
