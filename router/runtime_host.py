"""``<slug>.{apps_domain}``: gate, serve ``/svc-auth-return``, otherwise proxy."""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.exc import SQLAlchemyError
from starlette.datastructures import QueryParams
from starlette.types import Receive, Scope, Send

from router.auth_return import auth_return_page
from router.auth_return_path import is_auth_return_path
from router.gating import RuntimeRoute, gate
from router.pages import gateway_page, setup_page
from router.proxy import HttpProxy
from router.resources import Resources
from router.settings import Settings
from router.websocket_proxy import NOT_SERVED, WebSocketProxy, asks_for_a_path

log = logging.getLogger(__name__)


def is_auth_return(scope: Scope) -> bool:
    """Whether a request is for the service's ``/svc-auth-return``, by the rule the fast
    path applies too (``router/auth_return_path.py``), for every request type."""
    return is_auth_return_path(scope["path"])


class RuntimeHost:
    def __init__(self, settings: Settings, resources: Resources) -> None:
        self._settings = settings
        self._resources = resources
        self._http = HttpProxy(settings, resources.http_session)
        self._ws = WebSocketProxy(settings, resources.http_session)

    @property
    def http(self) -> HttpProxy:
        """The HTTP proxy, shared with the protocol's fast path (``router/fast_path.py``)."""
        return self._http

    async def __call__(self, scope: Scope, receive: Receive, send: Send, slug: str) -> None:
        try:
            route = await self._resources.app_directory().get(slug)
        except SQLAlchemyError as exc:
            log.error("app lookup failed for %s: %s", slug, type(exc).__name__)
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1011})
                return
            await gateway_page(503, slug, "The service is temporarily unavailable.")(
                scope, receive, send)
            return
        decision = gate(route)
        if scope["type"] == "websocket":
            # /svc-auth-return is the service's page (spec 4.7): an upgrade there is refused,
            # never relayed to the origin, whatever the gate says.
            if (decision.open and route is not None and asks_for_a_path(scope)
                    and not is_auth_return(scope)):
                await self._ws(scope, receive, send, route, lambda: self._until_closed(slug))
            else:
                await send({"type": "websocket.close", "code": NOT_SERVED})
            return
        if not decision.open or route is None:
            # /svc-auth-return included: no return URL on this host is accepted until it is
            # served, so a code can never have been sent here.
            await setup_page(slug, route, decision)(scope, receive, send)
            return
        if is_auth_return(scope):
            await self._auth_return(scope, receive, send, route)
            return
        await self._http(scope, receive, send, route)

    async def _until_closed(self, slug: str) -> None:
        """Returns once ``slug`` is no longer served. An open WebSocket asks the gate again
        every ``websocket_gate_interval`` through the app cache, as every HTTP request
        does, so it is closed within that interval plus the age of the cached entry (its
        TTL; a published change drops it at once). A lookup the database fails leaves the
        socket open until one says otherwise: the app's state is unknown, not changed. Any
        other error ends the watch, and the socket is closed (websocket_proxy._pump)."""
        directory = self._resources.app_directory()
        while True:
            await asyncio.sleep(self._settings.websocket_gate_interval)
            try:
                route = await directory.get(slug)
            except SQLAlchemyError as exc:
                log.warning("app lookup failed for an open websocket of %s: %s", slug,
                            type(exc).__name__)
                continue
            if not gate(route).open:
                return

    async def _auth_return(self, scope: Scope, receive: Receive, send: Send,
                           route: RuntimeRoute) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await gateway_page(405, route.name, "Use GET for the authorization return.",
                               headers={"allow": "GET, HEAD"})(scope, receive, send)
            return
        query = QueryParams(scope.get("query_string", b""))
        await auth_return_page(route, query.get("app"), query.get("code"))(scope, receive, send)
