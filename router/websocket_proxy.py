"""WebSocket upgrades on a runtime host, relayed to the origin with the same cookie rule."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import aiohttp
from starlette.types import Receive, Scope, Send
from yarl import URL

from router.gating import RuntimeRoute
from router.headers import TrustedProxies, upstream_request_headers
from router.origin import parse_origin
from router.settings import Settings

log = logging.getLogger(__name__)

# aiohttp writes its own handshake; the client's would clash with it.
_HANDSHAKE = frozenset({b"sec-websocket-key", b"sec-websocket-version",
                        b"sec-websocket-extensions", b"sec-websocket-protocol"})
# 1014 "bad gateway" is the close code for an origin we could not reach.
BAD_GATEWAY = 1014
# 1008 "policy violation" tells the client its runtime is not served (any more): at the
# handshake, or when an open socket's app stops being served. 1001 "going away" tells the
# origin, which did nothing wrong, that its client is gone.
NOT_SERVED = 1008
GOING_AWAY = 1001
# Returns once the app of an open socket is no longer served (router/runtime_host.py).
Stopped = Callable[[], Coroutine[Any, Any, None]]


def asks_for_a_path(scope: Scope) -> bool:
    """The upgrade's target is a path (origin-form), as a browser sends it. An absolute-form
    target or ``*`` is not joined to the origin's address: the upgrade is refused."""
    raw = scope.get("raw_path") or scope["path"].encode("latin-1")
    return bytes(raw).startswith(b"/")


class WebSocketProxy:
    def __init__(self, settings: Settings,
                 session: Callable[[], aiohttp.ClientSession]) -> None:
        self._settings = settings
        self._session = session
        self._trusted = TrustedProxies(settings.trusted_proxies)

    async def __call__(self, scope: Scope, receive: Receive, send: Send,
                       route: RuntimeRoute, stopped: Stopped) -> None:
        await receive()  # websocket.connect
        origin = parse_origin(route.origin or "", self._settings.allow_private_origins)
        if origin is None or origin.ip_literal_refused:
            await send({"type": "websocket.close", "code": BAD_GATEWAY})
            return
        client = scope.get("client")
        client_ip = client[0] if client else None
        headers = upstream_request_headers(
            scope["headers"], upstream_host=origin.host_header.encode(), client_ip=client_ip,
            scheme="https" if scope.get("scheme") == "wss" else "http",
            trusted_proxy=self._trusted.trusts(client_ip),
            extra_drop=_HANDSHAKE,
        )
        target = origin.base + scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        try:
            upstream = await self._session().ws_connect(
                URL(target, encoded=True), protocols=tuple(scope.get("subprotocols", ())),
                headers=[(n.decode("latin-1"), v.decode("latin-1")) for n, v in headers],
                autoclose=True, autoping=True, max_msg_size=16 * 1024 * 1024,
                timeout=aiohttp.ClientWSTimeout(ws_close=10),
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            log.info("websocket origin unreachable for %s: %s", route.slug, type(exc).__name__)
            await send({"type": "websocket.close", "code": BAD_GATEWAY})
            return
        # Upstream handshake headers (Set-Cookie included) are deliberately not relayed.
        await send({"type": "websocket.accept", "subprotocol": upstream.protocol})
        async with upstream:
            if await _pump(receive, send, upstream, stopped):
                log.info("websocket closed for %s: no longer served", route.slug)


async def _pump(receive: Receive, send: Send, upstream: aiohttp.ClientWebSocketResponse,
                stopped: Stopped) -> bool:
    """Relay until a side closes or ``stopped`` returns; True when it was ``stopped``."""
    relays = [asyncio.create_task(_client_to_origin(receive, upstream)),
              asyncio.create_task(_origin_to_client(send, upstream))]
    watch = asyncio.create_task(stopped())
    try:
        done, _ = await asyncio.wait([*relays, watch], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (*relays, watch):
            task.cancel()
        await asyncio.gather(*relays, watch, return_exceptions=True)
    if watch not in done or any(task in done for task in relays):
        return False  # a side closed first, and the other was told by its relay
    if watch.exception() is not None:  # not a decision: closed all the same, and said why
        log.error("websocket gate check failed: %r", watch.exception())
    # The relays are stopped first, so no frame crosses either way after the decision.
    with contextlib.suppress(Exception):
        await send({"type": "websocket.close", "code": NOT_SERVED})
    with contextlib.suppress(Exception):
        await upstream.close(code=GOING_AWAY)
    return True


async def _client_to_origin(receive: Receive, upstream: aiohttp.ClientWebSocketResponse) -> None:
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            await upstream.close(code=message.get("code", 1000))
            return
        if message.get("text") is not None:
            await upstream.send_str(message["text"])
        elif message.get("bytes") is not None:
            await upstream.send_bytes(message["bytes"])


async def _origin_to_client(send: Send, upstream: aiohttp.ClientWebSocketResponse) -> None:
    async for msg in upstream:
        if msg.type == aiohttp.WSMsgType.TEXT:
            await send({"type": "websocket.send", "text": msg.data})
        elif msg.type == aiohttp.WSMsgType.BINARY:
            await send({"type": "websocket.send", "bytes": msg.data})
    with contextlib.suppress(Exception):
        await send({"type": "websocket.close", "code": upstream.close_code or 1000})
