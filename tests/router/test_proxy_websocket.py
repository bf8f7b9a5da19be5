"""WebSocket upgrades relayed to a real aiohttp origin, with the proxy's header rules."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from aiohttp import WSMsgType, web
from sqlalchemy.orm import Session, sessionmaker
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Subprotocol

from payments.models import AppStatus, DomainRequestStatus, RuntimeStatus
from router.invalidation import publish_app_changed_sync
from router.settings import Settings
from tests.factories import update_app
from tests.router.origins import aiohttp_origin, closed_port, proxied
from tests.router.test_proxy_headers import FORGED, claims_seen
from tests.support.router import RouterFactory, RunningRouter
from tests.support.servers import AiohttpServer


@dataclass
class EchoOrigin:
    """Echoes text and binary; ``close:<code>`` makes it close with that code."""

    handshakes: list[list[tuple[str, str]]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    client_close_codes: list[int | None] = field(default_factory=list)
    closed: threading.Event = field(default_factory=threading.Event)

    async def handler(self, request: web.Request) -> web.WebSocketResponse:
        self.handshakes.append([(k.lower(), v) for k, v in request.headers.items()])
        self.paths.append(request.raw_path)
        ws = web.WebSocketResponse(protocols=("chat.v1",))
        ws.set_cookie("ws_session", "origin-secret")
        ws.headers["Alt-Svc"] = 'h3=":8443"; ma=86400'
        await ws.prepare(request)
        async for msg in ws:
            if msg.type == WSMsgType.TEXT and msg.data.startswith("close:"):
                await ws.close(code=int(msg.data.removeprefix("close:")))
            elif msg.type == WSMsgType.TEXT:
                await ws.send_str(msg.data)
            elif msg.type == WSMsgType.BINARY:
                await ws.send_bytes(msg.data)
        self.client_close_codes.append(ws.close_code)
        self.closed.set()
        return ws


@pytest.fixture
def echo() -> EchoOrigin:
    return EchoOrigin()


@pytest.fixture
def ws_origin(echo: EchoOrigin) -> Iterator[AiohttpServer]:
    with aiohttp_origin(("GET", "/ws", echo.handler)) as server:
        yield server


def ws_connect(router: RunningRouter, path: str = "/ws", subprotocols: list[str] | None = None,
               headers: list[tuple[str, str]] | None = None) -> ClientConnection:
    """Connect to ``ws://<slug>.{apps_domain}:PORT`` over a socket to the router on loopback."""
    sock = socket.create_connection(("127.0.0.1", router.port), timeout=5)
    offered = [Subprotocol(p) for p in subprotocols] if subprotocols else None
    return connect(f"ws://{router.host('game')}{path}", sock=sock, open_timeout=5,
                   close_timeout=5, subprotocols=offered, additional_headers=headers)


def test_websocket_messages_are_relayed_both_ways(start_proxy_router: RouterFactory,
                                                  proxy_sessions: sessionmaker[Session],
                                                  ws_origin: AiohttpServer,
                                                  echo: EchoOrigin) -> None:
    with proxied(start_proxy_router, proxy_sessions, ws_origin.url) as router, \
            ws_connect(router, "/ws?room=a%2Fb", subprotocols=["chat.v2", "chat.v1"],
                       headers=[("Cookie", "a=b"), ("X-Client", "1"), *FORGED]) as ws:
        assert ws.subprotocol == "chat.v1"
        ws.send("hello")
        assert ws.recv(timeout=5) == "hello"
        ws.send(b"\x00\x01binary\xff")
        assert ws.recv(timeout=5) == b"\x00\x01binary\xff"
        big = "x" * 200_000
        ws.send(big)
        assert ws.recv(timeout=5) == big
        assert ws.response is not None
        handshake_headers = {k.lower() for k in ws.response.headers}
        ws.close(code=1000)
        assert echo.closed.wait(5)
    # The origin's handshake headers are not relayed at all: Set-Cookie, Alt-Svc...
    assert not {"set-cookie", "alt-svc"} & handshake_headers
    seen = dict(echo.handshakes[0])
    assert "cookie" not in seen
    assert seen["x-client"] == "1"
    assert seen["host"] == f"127.0.0.1:{ws_origin.port}"
    assert claims_seen(echo.handshakes[0]) == [
        ("x-forwarded-for", "127.0.0.1"), ("x-forwarded-host", router.host("game")),
        ("x-forwarded-proto", "http")]
    assert echo.paths == ["/ws?room=a%2Fb"]
    assert echo.client_close_codes == [1000]


def test_an_origin_close_code_reaches_the_client(start_proxy_router: RouterFactory,
                                                 proxy_sessions: sessionmaker[Session],
                                                 ws_origin: AiohttpServer) -> None:
    with proxied(start_proxy_router, proxy_sessions, ws_origin.url) as router, \
            ws_connect(router) as ws:
        ws.send("close:4000")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=5)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 4000


def test_an_unreachable_websocket_origin_is_refused_at_once(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session]) -> None:
    with proxied(start_proxy_router, proxy_sessions,
                 f"http://127.0.0.1:{closed_port()}") as router:
        started = time.monotonic()
        with pytest.raises(InvalidStatus) as refused:
            ws_connect(router)
        elapsed = time.monotonic() - started
    assert refused.value.response.status_code == 403
    assert elapsed < 3.0


def test_open_websockets_are_not_capped_at_the_idle_pool_size(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        ws_origin: AiohttpServer) -> None:
    """Each WebSocket holds its origin connection for its life; the pool size bounds idle
    HTTP connections only. (Capped at it, the handshake past it waited, with no timeout,
    for another WebSocket to close: bench/proxy_cases.py case 5 hung at 512 a process.)"""
    with proxied(start_proxy_router, proxy_sessions, ws_origin.url,
                 proxy_pool_size=2) as router, contextlib.ExitStack() as open_sockets:
        sockets = [open_sockets.enter_context(ws_connect(router)) for _ in range(3)]
        for i, ws in enumerate(sockets):
            ws.send(f"still here {i}")
            assert ws.recv(timeout=5) == f"still here {i}"


def test_an_upgrade_after_fast_path_requests_on_one_connection_is_relayed(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        echo: EchoOrigin) -> None:
    """A keep-alive connection served by the fast protocol hands itself to uvicorn's at the
    upgrade (router/fast_protocol.py), and the WebSocket works from there."""
    async def plain(request: web.Request) -> web.Response:
        return web.Response(text="plain")

    with aiohttp_origin(("GET", "/ws", echo.handler), ("GET", "/plain", plain)) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router:
        fast = router.service.fast_path
        assert fast is not None
        host = router.host("game")
        with socket.create_connection(("127.0.0.1", router.port), timeout=5) as warm:
            warm.sendall(f"GET /plain HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
                         .encode())
            while warm.recv(65536):
                pass  # the route is cached now
        before = fast.taken
        sock = socket.create_connection(("127.0.0.1", router.port), timeout=5)
        sock.sendall(f"GET /plain HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        answer = b""
        while not answer.endswith(b"plain"):
            chunk = sock.recv(65536)
            assert chunk, "the router closed the connection"
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200 ") and fast.taken == before + 1
        with connect(f"ws://{host}/ws", sock=sock, open_timeout=5, close_timeout=5) as ws:
            ws.send("after a fast request")
            assert ws.recv(timeout=5) == "after a fast request"
            ws.close(code=1000)
            assert echo.closed.wait(5)
    assert echo.client_close_codes == [1000]


@pytest.mark.parametrize("path", [
    "/svc-auth-return?app=game&code=sum_abcdefgh1234", "/svc-auth-return/",
    "/svc%2Dauth-return?app=game&code=sum_abcdefgh1234", "/svc-auth-return//",
])
def test_an_upgrade_to_the_auth_return_page_never_reaches_the_origin(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        echo: EchoOrigin, path: str) -> None:
    """Spec 4.7: /svc-auth-return is served by the service and never proxied; a WebSocket
    upgrade there, in any spelling the HTTP path takes for it, is refused."""
    with aiohttp_origin(("GET", "/ws", echo.handler),
                        ("GET", "/svc-auth-return", echo.handler),
                        ("GET", "/svc-auth-return/", echo.handler),
                        ("GET", "/svc-auth-return//", echo.handler)) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router:
        with pytest.raises(InvalidStatus) as refused:
            ws_connect(router, path)
        with ws_connect(router) as control:  # the origin and the gate are fine
            control.send("still relayed")
            assert control.recv(timeout=5) == "still relayed"
    assert refused.value.response.status_code == 403
    assert echo.paths == ["/ws"]


def raw_head(router: RunningRouter, target: str, upgrade: bool) -> bytes:
    """The head of the router's answer to a GET of ``target`` sent as it is, byte for byte
    (clients leave a fragment out; a raw one is what shows the paths apart)."""
    extra = ("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" if upgrade
             else "Connection: close\r\n")
    with socket.create_connection(("127.0.0.1", router.port), timeout=5) as conn:
        conn.sendall(f"GET {target} HTTP/1.1\r\nHost: {router.host('game')}\r\n{extra}\r\n"
                     .encode())
        answer = b""
        while b"\r\n\r\n" not in answer and (chunk := conn.recv(65536)):
            answer += chunk
    return answer.partition(b"\r\n\r\n")[0]


@pytest.mark.parametrize("target", [
    "/svc-auth-return#x", "/svc-auth-return/#x",
    "/svc-auth-return#x?app=game&code=sum_abcdefgh1234",
])
def test_a_fragment_does_not_hide_the_auth_return_page(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        echo: EchoOrigin, target: str) -> None:
    """A raw ``#`` in the target: httptools leaves it out of the path on both HTTP paths,
    so the service answers; uvicorn's WebSocket protocol kept it in the path, the check
    missed it, and aiohttp, dropping the fragment, asked the origin for
    ``/svc-auth-return``. One rule now: ``#`` ends the path everywhere."""
    with aiohttp_origin(("GET", "/ws", echo.handler),
                        ("GET", "/svc-auth-return", echo.handler),
                        ("GET", "/svc-auth-return/", echo.handler)) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router:
        fast = router.service.fast_path
        assert fast is not None
        with ws_connect(router):  # the route is cached: the fast path could take it
            pass
        heads = {"fast": raw_head(router, target, upgrade=False)}
        router.service.fast_path = None
        try:
            heads["uvicorn"] = raw_head(router, target, upgrade=False)
        finally:
            router.service.fast_path = fast
        heads["websocket"] = raw_head(router, target, upgrade=True)
    assert fast.taken == 0
    assert echo.paths == ["/ws"], heads
    assert heads["websocket"].startswith(b"HTTP/1.1 403 "), heads
    # The service's own page on both HTTP paths: 400 without a code, the page with one.
    assert heads["fast"].split(b"\r\n")[0] == heads["uvicorn"].split(b"\r\n")[0]
    assert heads["fast"].startswith((b"HTTP/1.1 400 ", b"HTTP/1.1 200 ")), heads


@pytest.mark.parametrize("target", [
    "http://{host}/ws", "ws://{host}/ws", "*", "ws",
])
def test_an_upgrade_whose_target_is_not_a_path_is_refused(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        echo: EchoOrigin, target: str, caplog: pytest.LogCaptureFixture) -> None:
    """Browsers ask for a WebSocket by its path. Any other target (absolute-form, ``*``)
    was joined to the origin's address as it came: a 500 and a traceback. Refused now
    (403, or 400 where uvicorn's protocol refuses it first), the origin never asked."""
    with aiohttp_origin(("GET", "/ws", echo.handler)) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router:
        head = raw_head(router, target.format(host=router.host("game")), upgrade=True)
        with ws_connect(router) as ws:  # the router still serves the app's real sockets
            ws.send("still")
            assert ws.recv(timeout=5) == "still"
    assert head.startswith((b"HTTP/1.1 403 ", b"HTTP/1.1 400 ")), head
    assert echo.paths == ["/ws"]
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text


# How soon an open socket learns that its app is no longer served, without Redis: the app
# cache's TTL (a lookup may be that old) plus the interval between checks (docs/router.md).
BOUND = Settings().app_cache_ttl_local + Settings().websocket_gate_interval
SLACK = 1.0  # a loaded two-core box


def closed_within(ws: ClientConnection, seconds: float) -> tuple[int | None, float]:
    """(the close code the router sent, seconds it took), waiting at most ``seconds``."""
    started = time.monotonic()
    with pytest.raises(ConnectionClosed) as closed:
        ws.recv(timeout=seconds)  # nothing is sent: only a close ends the wait
    assert closed.value.rcvd is not None, "closed without a close frame from the router"
    return closed.value.rcvd.code, time.monotonic() - started


@pytest.mark.parametrize("change", [
    {"kill_switch": True},
    {"runtime_status": RuntimeStatus.DISABLED},
    {"runtime_domain_request_status": DomainRequestStatus.REJECTED},
    {"status": AppStatus.SUSPENDED},
], ids=["kill_switch", "runtime_disabled", "domain_rejected", "app_suspended"])
def test_an_open_websocket_is_closed_once_its_app_is_not_served(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        ws_origin: AiohttpServer, echo: EchoOrigin, change: dict[str, object]) -> None:
    """The gate is asked again while a socket is open, not only at its handshake: the client
    gets 1008 and the origin 1001 within the bound, and relaying stops (audit C, 1)."""
    with proxied(start_proxy_router, proxy_sessions, ws_origin.url) as router, \
            ws_connect(router) as ws:
        ws.send("before")
        assert ws.recv(timeout=5) == "before"
        update_app(proxy_sessions, "game", **change)  # as svc-ops does, with no bus here
        code, waited = closed_within(ws, BOUND + 5)
        assert echo.closed.wait(5), "the origin's side is still open"
    assert code == 1008
    assert waited <= BOUND + SLACK, waited
    assert echo.client_close_codes == [1001]


def test_with_redis_a_published_change_closes_open_websockets_at_the_next_check(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        ws_origin: AiohttpServer, echo: EchoOrigin, redis_url: str) -> None:
    """With a live subscription the cache keeps entries 60 s; the published change drops
    the entry, so the next check (every second) already sees the kill switch."""
    with proxied(start_proxy_router, proxy_sessions, ws_origin.url,
                 redis_url=redis_url) as router, ws_connect(router) as ws:
        assert router.service.resources.change_bus().connected
        ws.send("before")
        assert ws.recv(timeout=5) == "before"
        update_app(proxy_sessions, "game", kill_switch=True)
        publish_app_changed_sync(redis_url, "game")
        code, waited = closed_within(ws, 10)
        assert echo.closed.wait(5)
    assert code == 1008
    assert waited <= Settings().websocket_gate_interval + SLACK, waited
    assert echo.client_close_codes == [1001]


def test_a_served_apps_websocket_stays_open_across_many_checks(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        ws_origin: AiohttpServer, echo: EchoOrigin) -> None:
    with proxied(start_proxy_router, proxy_sessions, ws_origin.url,
                 websocket_gate_interval=0.2) as router, ws_connect(router) as ws:
        directory = router.service.resources.app_directory()
        lookups = directory.lookups
        ends = time.monotonic() + 2.5  # a dozen checks, and the cached entry expires twice
        sent = 0
        while time.monotonic() < ends:
            ws.send(f"still here {sent}")
            assert ws.recv(timeout=5) == f"still here {sent}"
            sent += 1
            time.sleep(0.1)
        assert directory.lookups > lookups  # the checks ran, and looked the app up again
        ws.close(code=1000)
        assert echo.closed.wait(5)
    assert echo.client_close_codes == [1000]
