"""How a request head refused by ``router/head_limits.py`` is answered."""

from __future__ import annotations

from http import HTTPStatus

from starlette.responses import JSONResponse, Response

from router.head_limits import HeadLimits, HeadRefused
from router.hosts import HostKind, HostTable
from router.pages import gateway_page

_CODES = {400: "bad_request", 414: "uri_too_long", 431: "request_header_fields_too_large"}


class HeadPolicy:
    """The limits, and how a refused head is answered: the gateway page on a runtime host
    (what a visitor of the app sees for every other failure of the router), the error
    envelope everywhere else."""

    def __init__(self, limits: HeadLimits, table: HostTable | None) -> None:
        self.limits = limits
        self._table = table

    def answer(self, refused: HeadRefused, host: bytes | None) -> bytes:
        """The whole answer: status line, headers with ``connection: close``, body."""
        status = refused.status
        response: Response | None = None
        if self._table is not None:
            target = self._table.classify(host.decode("latin-1") if host else None)
            if target.kind is HostKind.RUNTIME and target.slug is not None:
                response = gateway_page(status, target.slug, refused.why)
        if response is None:
            response = JSONResponse({"code": _CODES.get(status, "bad_request"),
                                     "message": refused.why}, status_code=status)
        phrase = HTTPStatus(status).phrase.encode("ascii")
        parts = [b"HTTP/1.1 %d %s\r\n" % (status, phrase)]
        for name, value in response.raw_headers:
            parts += (name, b": ", value, b"\r\n")
        parts.append(b"connection: close\r\n\r\n")
        parts.append(bytes(response.body))
        return b"".join(parts)
