"""Reverse proxy from ``<slug>.{apps_domain}`` to the developer's saved origin.

Raw ASGI on purpose: this is the hot path, and Starlette's Request/Response layers
cost more than the proxying itself (bench/proxy_bench.py). Decisions live in
:mod:`router.headers`; this module only moves bytes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
from starlette.types import Receive, Scope, Send
from yarl import URL

from router.gating import RuntimeRoute
from router.headers import (
    content_length,
    downstream_response_headers,
    is_trusted,
    upstream_request_headers,
)
from router.pages import gateway_page
from router.settings import Settings
from router.upstream import Origin, OriginAddressRefused, parse_origin

log = logging.getLogger(__name__)

# Below this a response is read whole and sent in one message: no disconnect watcher,
# one write. Above it (or without Content-Length) the body streams chunk by chunk.
SMALL_BODY = 64 * 1024


class BodyTooLarge(Exception):
    pass


class RequestBody:
    """Streams the client's body to the origin, counting bytes against the limit."""

    def __init__(self, receive: Receive, limit: int) -> None:
        self._receive = receive
        self._limit = limit
        self.finished = False
        self.disconnected = False
        self.too_large = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        while not self.finished:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self.disconnected = True
                raise ConnectionResetError("client went away during the upload")
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self._limit:
                self.too_large = True  # aiohttp re-raises this as a ClientConnectionError
                raise BodyTooLarge
            self.finished = not message.get("more_body", False)
            if chunk:
                yield chunk


class HttpProxy:
    def __init__(self, settings: Settings,
                 session: Callable[[], aiohttp.ClientSession]) -> None:
        self._settings = settings
        self._session = session
        self._trusted = settings.trusted_proxies

    def origin_for(self, route: RuntimeRoute) -> Origin | None:
        if not route.origin:
            return None
        return parse_origin(route.origin, self._settings.allow_private_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send,
                       route: RuntimeRoute) -> None:
        settings = self._settings
        origin = self.origin_for(route)
        if origin is None or origin.ip_literal_refused:
            await gateway_page(502, route.name, "The app's origin address is not allowed.")(
                scope, receive, send)
            return
        headers = scope["headers"]
        declared = content_length(headers)
        if declared is not None and declared > settings.proxy_max_request_bytes:
            await gateway_page(413, route.name, "The request body is larger than this app "
                               "accepts.")(scope, receive, send)
            return
        method: str = scope["method"]
        has_body = (declared or 0) > 0 or any(n == b"transfer-encoding" for n, _ in headers)
        body = RequestBody(receive, settings.proxy_max_request_bytes) if has_body else None
        client = scope.get("client")
        client_ip = client[0] if client else None
        out_headers = upstream_request_headers(
            headers, upstream_host=origin.host_header.encode(), client_ip=client_ip,
            scheme=scope.get("scheme", "http"),
            trusted_proxy=is_trusted(client_ip, self._trusted),
        )
        target = origin.base + scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        url = URL(target, encoded=True)
        str_headers = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in out_headers]
        try:
            response = await self._request(method, url, str_headers, body)
        except aiohttp.ClientConnectorDNSError as exc:
            why = ("The app's origin address is not allowed."
                   if isinstance(exc.os_error, OriginAddressRefused)
                   else "The app's origin name could not be resolved.")
            await gateway_page(502, route.name, why)(scope, receive, send)
            return
        except TimeoutError:
            await gateway_page(504, route.name, "The app's origin did not answer in time.")(
                scope, receive, send)
            return
        except (aiohttp.ClientError, OSError, BodyTooLarge) as exc:
            if body is not None and body.disconnected:
                return  # nobody is left to answer
            if body is not None and body.too_large:
                await gateway_page(413, route.name, "The request body is larger than this app "
                                   "accepts.")(scope, receive, send)
                return
            log.info("origin unreachable for %s: %s", route.slug, type(exc).__name__)
            await gateway_page(502, route.name, "The app's origin could not be reached.")(
                scope, receive, send)
            return
        try:
            await self._relay(scope, receive, send, route, response, body)
        finally:
            response.release()

    async def _request(self, method: str, url: URL, headers: list[tuple[str, str]],
                       body: RequestBody | None) -> aiohttp.ClientResponse:
        # aiohttp itself retries an idempotent request once when the connection turns out
        # closed, and never replays a body it began sending (aio-libs/aiohttp#10790); a
        # retry loop here as well would send such a request to the origin up to 4 times.
        return await self._session().request(method, url, headers=headers, data=body,
                                             allow_redirects=False, compress=None)

    async def _relay(self, scope: Scope, receive: Receive, send: Send, route: RuntimeRoute,
                     response: aiohttp.ClientResponse, body: RequestBody | None) -> None:
        limit = self._settings.proxy_max_response_bytes
        headers = downstream_response_headers(response.raw_headers)
        length = content_length(headers)
        if length is not None and length > limit:
            await gateway_page(502, route.name, "The app's response is larger than the "
                               "service relays.")(scope, receive, send)
            return
        bodyless = scope["method"] == "HEAD" or response.status in (204, 304)
        if bodyless or (length is not None and length <= SMALL_BODY):
            try:
                payload = b"" if bodyless else await response.read()
            except (aiohttp.ClientError, TimeoutError, OSError):
                await gateway_page(502, route.name, "The app's origin broke off its answer.")(
                    scope, receive, send)
                return
            await send({"type": "http.response.start", "status": response.status,
                        "headers": headers})
            await send({"type": "http.response.body", "body": payload})
            return
        await send({"type": "http.response.start", "status": response.status,
                    "headers": headers})
        await self._stream(receive, send, route, response, limit,
                           watch=body is None or body.finished)

    async def _stream(self, receive: Receive, send: Send, route: RuntimeRoute,
                      response: aiohttp.ClientResponse, limit: int, watch: bool) -> None:
        watcher = asyncio.create_task(_wait_disconnect(receive, response)) if watch else None
        sent = 0
        try:
            async for chunk in response.content.iter_any():
                sent += len(chunk)
                if sent > limit:
                    log.warning("response from %s exceeded %d bytes; aborted", route.slug, limit)
                    return  # the server closes the connection: the client sees a cut body
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            if watcher is None or not watcher.done():
                log.warning("origin of %s broke off mid-response: %s", route.slug,
                            type(exc).__name__)
        finally:
            if watcher is not None:
                watcher.cancel()


async def _wait_disconnect(receive: Receive, response: aiohttp.ClientResponse) -> None:
    """Close the upstream response as soon as the client goes away."""
    while True:
        message: dict[str, Any] = dict(await receive())
        if message["type"] == "http.disconnect":
            response.close()
            return
