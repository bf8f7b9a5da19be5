"""Outside dev the proxy connects to public addresses only (no loopback, no DNS tricks)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import httpx
import pytest
from aiohttp import web
from aiohttp.abc import ResolveResult
from sqlalchemy.orm import Session, sessionmaker
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from router.upstream import CheckedResolver, OriginAddressRefused
from tests.factories import add_app
from tests.router.origins import aiohttp_origin
from tests.support.router import RouterFactory
from tests.support.servers import AiohttpServer
from tests.support.services import free_port


def production(port: int) -> dict[str, object]:
    """Production settings: https service URLs (the router itself listens on plain http
    on loopback); mail is required but never sent by these tests."""
    return {"mode": "production", "allow_private_origins": False, "apps_scheme": "https",
            "smtp_host": "127.0.0.1", "smtp_port": port, "secret_key": "k" * 40,
            **{f"{name}_url": f"https://{name}.localhost:{port}"
               for name in ("base", "portal", "console", "docs")}}


@pytest.fixture
def live_origin() -> Iterator[tuple[AiohttpServer, list[str]]]:
    hits: list[str] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        hits.append(request.path_qs)
        if request.path == "/ws":
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            await ws.close()
            return ws
        return web.Response(text="reached")

    with aiohttp_origin(("GET", "/{tail:.*}", handler)) as server:
        yield server, hits


def private_spellings(port: int) -> dict[str, str]:
    """Slugs to origins that all reach this machine's loopback listener."""
    return {
        "literal": f"http://127.0.0.1:{port}",
        "name": f"http://localhost:{port}",
        "hex-form": f"http://0x7f.1:{port}",  # a name to yarl, 127.0.0.1 to getaddrinfo
        "unspecified": f"http://0.0.0.0:{port}",
        "mapped": f"http://[::ffff:127.0.0.1]:{port}",
        # yarl refuses these non-canonical IPv4 forms before any connection is tried
        "short-form": f"http://127.1:{port}",
        "integer-form": f"http://2130706433:{port}",
    }


def test_private_origins_get_a_502_and_no_request_in_production(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        live_origin: tuple[AiohttpServer, list[str]]) -> None:
    origin, hits = live_origin
    spellings = private_spellings(origin.port)
    for slug, url in spellings.items():
        add_app(proxy_sessions, slug, url)
    with start_proxy_router(**production(free_port())) as router:
        for slug in spellings:
            with router.client(slug) as client:
                response = client.get("/steal")
            assert response.status_code == 502, slug
            if not slug.endswith("-form") or slug == "hex-form":
                assert "origin address is not allowed" in response.text, slug
        for slug in ("literal", "name"):
            sock = socket.create_connection(("127.0.0.1", router.port), timeout=5)
            with pytest.raises(InvalidStatus):
                connect(f"ws://{router.host(slug)}/ws", sock=sock, open_timeout=5)
    assert hits == []
    # The same origin is live: in dev the router reaches it.
    with start_proxy_router() as router, router.client("name") as client:
        assert client.get("/fine").text == "reached"
    assert httpx.get(f"{origin.url}/direct").text == "reached"
    assert hits == ["/fine", "/direct"]


class PublicDns:
    """Stands in for a public DNS answer: the one allowed fake, since no test may depend on
    (or control) what real DNS returns for a name. It returns fixed addresses as
    aiohttp's ThreadedResolver would shape them."""

    def __init__(self, hosts: list[str]) -> None:
        self.hosts = hosts

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        return [ResolveResult(hostname=host, host=h, port=port,
                              family=socket.AF_INET6 if ":" in h else socket.AF_INET,
                              proto=0, flags=socket.AI_NUMERICHOST) for h in self.hosts]

    async def close(self) -> None:
        pass


async def checked(answers: list[str], allow_private: bool = False) -> list[str]:
    resolver = CheckedResolver(allow_private)
    await resolver.close()  # the real inner resolver is replaced below
    resolver._inner = PublicDns(answers)  # type: ignore[assignment]
    return [r["host"] for r in await resolver.resolve("origin.example", 443)]


PRIVATE_ANSWERS = ["10.0.0.5", "192.168.1.1", "172.16.0.1", "127.0.0.1", "0.0.0.0",
                   "169.254.169.254", "100.64.0.1", "::1", "fe80::1%eth0", "fc00::1",
                   "::ffff:127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::a00:1", "224.0.0.1",
                   # IPv4-compatible (::a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d, SIIT),
                   # site-local: deprecated forms a host or a translator may still carry
                   "::127.0.0.1", "::a00:1", "::ffff:0:7f00:1", "::ffff:0:a00:1", "fec0::1"]
PUBLIC_ANSWERS = ["93.184.216.34", "2606:4700::6810:85e5"]


def test_checked_resolver_keeps_only_public_answers() -> None:
    mixed = [*PRIVATE_ANSWERS[:7], PUBLIC_ANSWERS[0], *PRIVATE_ANSWERS[7:], PUBLIC_ANSWERS[1]]
    assert asyncio.run(checked(mixed)) == PUBLIC_ANSWERS


def test_checked_resolver_refuses_a_name_with_only_private_answers() -> None:
    with pytest.raises(OriginAddressRefused):
        asyncio.run(checked(PRIVATE_ANSWERS))
    for private in PRIVATE_ANSWERS:
        with pytest.raises(OriginAddressRefused):
            asyncio.run(checked([private]))


def test_checked_resolver_allows_everything_in_dev() -> None:
    assert asyncio.run(checked(PRIVATE_ANSWERS, allow_private=True)) == PRIVATE_ANSWERS


def test_a_websocket_upgrade_is_never_redirected(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        live_origin: tuple[AiohttpServer, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    """An origin answering the upgrade with a redirect to a private address (here the
    loopback listener of ``live_origin``, standing in for an internal service or the cloud
    metadata address) must not have the router go there: an IP-literal target is never
    put to the resolver that checks addresses."""
    internal, hits = live_origin
    redirected: list[str] = []

    async def redirect(request: web.Request) -> web.StreamResponse:
        redirected.append(request.path)
        raise web.HTTPFound(f"http://127.0.0.1:{internal.port}/ws")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", redirect)
    # The app's origin is a name whose (stand-in) public DNS answer is 127.0.0.2, the one
    # address this test takes for a public one; 127.0.0.1 stays private.
    monkeypatch.setattr("router.origin.is_public_address", lambda ip: str(ip) == "127.0.0.2")
    monkeypatch.setattr("router.origin.aiohttp.ThreadedResolver",
                        lambda: PublicDns(["127.0.0.2"]))
    with AiohttpServer(app, host="127.0.0.2") as origin:
        add_app(proxy_sessions, "game", f"http://origin.example:{origin.port}")
        with start_proxy_router(**production(free_port())) as router:
            with router.client("game") as client:
                answer = client.get("/page")
            # plain HTTP: the redirect is relayed, never followed
            assert answer.status_code == 302
            sock = socket.create_connection(("127.0.0.1", router.port), timeout=5)
            with pytest.raises(InvalidStatus) as refused:
                connect(f"ws://{router.host('game')}/ws", sock=sock, open_timeout=5)
            assert refused.value.response.status_code == 403
    assert redirected == ["/page", "/ws"]  # the origin was asked
    assert hits == []  # and the address it pointed at never was
