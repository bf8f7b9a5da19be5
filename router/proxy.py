"""Reverse proxy from ``<slug>.{apps_domain}`` to the developer's saved origin.

Raw ASGI on purpose: this is the hot path, and Starlette's Request/Response layers
cost more than the proxying itself (bench/proxy_bench.py). Decisions live in
:mod:`router.headers`; :mod:`router.upstream_client` talks to the origin; this module
only moves bytes between the two.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from functools import partial

import aiohttp
from starlette.types import Receive, Scope, Send

from router.gating import RuntimeRoute
from router.headers import Headers, TrustedProxies, plan_request, plan_response
from router.origin import Origin, OriginAddressRefused, parse_origin
from router.origin_connection import OriginConnection
from router.origin_errors import ClientGone, OriginError, OriginUnresolved
from router.pages import gateway_page
from router.settings import Settings
from router.upstream import upstream_client
from router.upstream_client import OriginResponse, UpstreamClient

log = logging.getLogger(__name__)

# Below this a response is read whole and sent in one message: no disconnect watcher,
# one write. Above it (or without Content-Length) the body streams chunk by chunk.
SMALL_BODY = 64 * 1024
_NO_BODY_STATUS = (204, 304)


# Writes a whole small answer (status, headers, body) below ASGI, in one go; False when it
# wrote nothing and the answer must go through ``send`` (router/fast_protocol.py).
WholeWriter = Callable[[int, Headers, bytes], bool]


class BodyTooLarge(Exception):
    pass


def bodyless(method: str, status: int) -> bool:
    """Whether an answer carries no body, whatever its headers say."""
    return method == "HEAD" or status in _NO_BODY_STATUS


def request_target(raw_path: bytes, query_string: bytes) -> bytes:
    """What the origin is asked for: the client's path as it came, and its query."""
    return raw_path + b"?" + query_string if query_string else raw_path


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
                self.too_large = True
                raise BodyTooLarge
            self.finished = not message.get("more_body", False)
            if chunk:
                yield chunk


async def client_left(receive: Receive) -> None:
    """Returns once the downstream client has disconnected."""
    while (await receive())["type"] != "http.disconnect":
        pass


class HttpProxy:
    def __init__(self, settings: Settings,
                 session: Callable[[], aiohttp.ClientSession]) -> None:
        self._settings = settings
        self._session = session
        # Shared with the fast path (router/fast_path.py): one memory of peers for both.
        self.trusted = TrustedProxies(settings.trusted_proxies)
        self._allow_private = settings.allow_private_origins
        self._max_request = settings.proxy_max_request_bytes
        self._max_response = settings.proxy_max_response_bytes
        self._upstream_session: aiohttp.ClientSession | None = None
        self._upstream: UpstreamClient | None = None

    def client(self) -> UpstreamClient:
        session = self._session()
        client = self._upstream
        if client is None or session is not self._upstream_session:  # a new lifespan
            client = self._upstream = upstream_client(session)
            self._upstream_session = session
        return client

    def origin_for(self, route: RuntimeRoute) -> Origin | None:
        if not route.origin:
            return None
        return parse_origin(route.origin, self._allow_private)

    async def __call__(self, scope: Scope, receive: Receive, send: Send,
                       route: RuntimeRoute) -> None:
        origin = self.origin_for(route)
        if origin is None or origin.ip_literal_refused:
            await gateway_page(502, route.name, "The app's origin address is not allowed.")(
                scope, receive, send)
            return
        peer = scope.get("client")
        client_ip = peer[0] if peer else None
        headers, declared, chunked = plan_request(
            scope["headers"], upstream_host=origin.host_bytes, client_ip=client_ip,
            scheme=scope.get("scheme", "http"),
            trusted_proxy=self.trusted.trusts(client_ip),
        )
        if declared is not None and declared > self._max_request:
            await gateway_page(413, route.name, "The request body is larger than this app "
                               "accepts.")(scope, receive, send)
            return
        has_body = chunked or (declared or 0) > 0
        body = RequestBody(receive, self._max_request) if has_body else None
        target = request_target(scope.get("raw_path") or scope["path"].encode(),
                                scope.get("query_string", b""))
        await self.exchange(scope, receive, send, route=route, origin=origin, headers=headers,
                            target=target, body=body, chunked=chunked)

    async def exchange(self, scope: Scope, receive: Receive, send: Send, *,
                       route: RuntimeRoute, origin: Origin, headers: Headers, target: bytes,
                       body: RequestBody | bytes | None = None, chunked: bool = False,
                       write_whole: WholeWriter | None = None,
                       started: OriginConnection | None = None,
                       failed: BaseException | None = None) -> None:
        """Send the planned request to ``origin`` and relay its answer, or the gateway page
        of what went wrong. The ASGI path comes here from :meth:`__call__`; the protocol's
        fast path (``router/fast_path.py``) straight from a parsed request, with its whole
        body as ``bytes`` if it had one, ``write_whole`` for a small answer, and
        ``started`` when ``router/fast_exchange.py`` already sent the request on that
        connection, or ``failed`` when opening a connection for it failed so (answered as
        if :meth:`UpstreamClient.request` had raised it here)."""
        gone = partial(client_left, receive)
        streamed = body if isinstance(body, RequestBody) else None
        try:
            if failed is not None:
                raise failed
            response = await self.client().request(
                origin, scope["method"], target, headers, body, chunked=chunked,
                client_gone=gone, started=started)
        except ClientGone:
            return  # nobody is left to answer
        except OriginAddressRefused:
            await gateway_page(502, route.name, "The app's origin address is not allowed.")(
                scope, receive, send)
            return
        except OriginUnresolved:
            await gateway_page(502, route.name, "The app's origin name could not be "
                               "resolved.")(scope, receive, send)
            return
        except TimeoutError:
            await gateway_page(504, route.name, "The app's origin did not answer in time.")(
                scope, receive, send)
            return
        except (OriginError, OSError, BodyTooLarge) as exc:
            if streamed is not None and streamed.disconnected:
                return
            if streamed is not None and streamed.too_large:
                await gateway_page(413, route.name, "The request body is larger than this app "
                                   "accepts.")(scope, receive, send)
                return
            log.info("origin unreachable for %s: %s", route.slug, type(exc).__name__)
            await gateway_page(502, route.name, "The app's origin could not be reached.")(
                scope, receive, send)
            return
        try:
            # The client is watched while the body streams, once its own body is read.
            await self._relay(scope, receive, send, route, response,
                              watch=streamed is None or streamed.finished,
                              write_whole=write_whole)
        finally:
            response.release()

    def relays_whole(self, method: str, status: int, length: int | None) -> bool:
        """Whether an answer is read whole and sent in one message: not streamed, not
        refused for its declared size."""
        if length is not None and length > self._max_response:
            return False
        return bodyless(method, status) or (length is not None and length <= SMALL_BODY)

    async def _relay(self, scope: Scope, receive: Receive, send: Send, route: RuntimeRoute,
                     response: OriginResponse, watch: bool,
                     write_whole: WholeWriter | None = None) -> None:
        headers, length = plan_response(response.headers)
        if length is not None and length > self._max_response:
            await gateway_page(502, route.name, "The app's response is larger than the "
                               "service relays.")(scope, receive, send)
            return
        status = response.status
        if self.relays_whole(scope["method"], status, length):
            try:
                payload = (b"" if bodyless(scope["method"], status)
                           else response.body() if response.complete
                           else await response.read())
            except ClientGone:
                return
            except OriginError:
                await gateway_page(502, route.name, "The app's origin broke off its answer.")(
                    scope, receive, send)
                return
            if write_whole is not None and write_whole(status, headers, payload):
                return
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": payload})
            return
        await send({"type": "http.response.start", "status": status, "headers": headers})
        if watch:
            response.watch(partial(client_left, receive))
        await self._stream(send, route, response)

    async def _stream(self, send: Send, route: RuntimeRoute,
                      response: OriginResponse) -> None:
        limit = self._max_response
        sent = 0
        try:
            while chunk := await response.next_chunk():
                sent += len(chunk)
                if sent > limit:
                    log.warning("response from %s exceeded %d bytes; aborted", route.slug, limit)
                    return  # the server closes the connection: the client sees a cut body
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        except ClientGone:
            pass
        except OriginError as exc:
            log.warning("origin of %s broke off mid-response: %s", route.slug,
                        type(exc).__name__)
