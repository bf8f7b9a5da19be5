"""Reading the console's HTML forms (``application/x-www-form-urlencoded``), bounded."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs

from starlette.requests import Request

from payments.errors import ApiError

MAX_FORM_BYTES = 16 * 1024


@dataclass(frozen=True)
class Form:
    fields: dict[str, list[str]]

    def get(self, name: str, default: str = "") -> str:
        values = self.fields.get(name)
        return values[0] if values else default

    def optional(self, name: str) -> str | None:
        """The stripped value, or None when the field is absent or blank."""
        value = self.get(name).strip()
        return value or None

    def all(self, name: str) -> list[str]:
        return list(self.fields.get(name, []))

    def checked(self, name: str) -> bool:
        return name in self.fields


async def read_form(request: Request) -> Form:
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        raise ApiError("unsupported_media_type", 415, "Send the form as a web form.")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise ApiError("payload_too_large", 413, "The form is too large.")
    try:
        text = body.decode("utf-8")
        fields = parse_qs(text, keep_blank_values=True, strict_parsing=False,
                          max_num_fields=100)
    except (UnicodeDecodeError, ValueError):
        raise ApiError("invalid_form", 400, "The form could not be read.") from None
    return Form(fields)
