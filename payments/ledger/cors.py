"""CORS for the browser-facing payment endpoints: only app audiences, never ``*``.

A preflight cannot know which code will follow, so it admits any origin that could be a
summary audience (the portal, an app runtime host, a local dev origin); the request
itself is then checked against its code's exact audience.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response

from payments.errors import ApiError, error_response

Endpoint = Callable[[Request], Awaitable[Response]]

ALLOWED_HEADERS = "content-type, x-wallet-address, x-svc-budget-spender"
# Response headers a page may read beyond the CORS-safelisted ones: a 429 (or 503) says in
# Retry-After when to try again, and a page told nothing would retry at once or give up.
EXPOSED_HEADERS = "Retry-After"
_LOCAL = re.compile(r"^http://(localhost|127\.0\.0\.1):[0-9]{1,5}\Z")


class Cors:
    def __init__(self, portal_origin: str, apps_domain: str, apps_scheme: str) -> None:
        self._portal = portal_origin
        self._runtime = re.compile(
            rf"^{re.escape(apps_scheme)}://[a-z0-9](?:[a-z0-9-]{{0,61}}[a-z0-9])?"
            rf"\.{re.escape(apps_domain)}(?::[0-9]{{1,5}})?\Z")

    def plausible(self, origin: str | None) -> bool:
        if not origin:
            return False
        return (origin == self._portal or bool(self._runtime.match(origin))
                or bool(_LOCAL.match(origin)))

    def preflight(self, request: Request) -> Response:
        origin = request.headers.get("origin")
        if not self.plausible(origin):
            return Response(status_code=403, headers={"vary": "Origin"})
        assert origin is not None
        return Response(status_code=204, headers={
            "access-control-allow-origin": origin, "access-control-allow-methods": "GET, POST",
            "access-control-allow-headers": ALLOWED_HEADERS, "access-control-max-age": "600",
            "vary": "Origin"})

    def readable_errors(self, endpoint: Endpoint) -> Endpoint:
        """Errors of a browser endpoint are readable by the page that called it, so the
        client can tell AUTHORIZATION_CODE_CONSUMED from a network failure (spec 4.9)."""
        async def wrapped(request: Request) -> Response:
            try:
                return await endpoint(request)
            except ApiError as exc:
                origin = request.headers.get("origin")
                return self.allow(error_response(exc), origin,
                                  origin if self.plausible(origin) else None)
        return wrapped

    @staticmethod
    def allow(response: Response, origin: str | None, audience: str | None) -> Response:
        """Let the browser read ``response`` only if it came from the code's audience."""
        response.headers["vary"] = "Origin"
        if origin and audience and origin == audience:
            response.headers["access-control-allow-origin"] = origin
            response.headers["access-control-expose-headers"] = EXPOSED_HEADERS
        return response


def preflight_route(cors: Cors) -> Callable[[Request], Response]:
    def handler(request: Request) -> Response:
        return cors.preflight(request)
    return handler
