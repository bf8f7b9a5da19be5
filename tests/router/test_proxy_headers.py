"""Header rules of the runtime proxy, end to end against real origins on loopback.

Cookies, hop-by-hop headers, forwarding claims, Host, Server/Date, Content-Encoding,
redirects and body-less responses.
"""

from __future__ import annotations

import asyncio
import gzip
import ipaddress
import os
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager

import httpx
import pytest
from aiohttp import web
from sqlalchemy.orm import Session, sessionmaker

from tests.router.origins import RawOrigin, aiohttp_origin, plain_client, proxied
from tests.support.router import RouterFactory
from tests.support.servers import AiohttpServer

HOP_BY_HOP = ("connection", "keep-alive", "te", "trailer", "upgrade", "proxy-authorization",
              "proxy-authenticate", "proxy-connection", "transfer-encoding")
BIG = 200 * 1024  # above router.proxy.SMALL_BODY: the streamed relay path


def seen_headers(response: httpx.Response) -> list[tuple[str, str]]:
    return [(name, value) for name, value in response.json()["headers"]]


def names(headers: list[tuple[str, str]]) -> list[str]:
    return [name for name, _ in headers]


async def echo(request: web.Request) -> web.Response:
    body = await request.content.read()
    return web.json_response({
        "method": request.method, "path_qs": request.raw_path,
        "headers": [[k.lower(), v] for k, v in request.headers.items()],
        "body_len": len(body),
    })


@pytest.fixture
def echo_origin() -> Iterator[AiohttpServer]:
    with aiohttp_origin(("*", "/{tail:.*}", echo)) as server:
        yield server


# -- 1. cookies ---------------------------------------------------------------------------

async def cookie_jar(request: web.Request) -> web.StreamResponse:
    size = int(request.query.get("size", "10"))
    response = web.StreamResponse() if size > BIG // 2 else web.Response(body=b"c" * size)
    response.set_cookie("sid", "one")
    response.set_cookie("theme", "dark", domain="apps.localhost")
    response.headers.add("Set-Cookie2", "old=1")
    response.headers["X-Origin"] = "yes"
    if isinstance(response, web.Response):
        return response
    await response.prepare(request)
    await response.write(b"c" * size)
    await response.write_eof()
    return response


def test_request_cookies_never_reach_the_origin(start_proxy_router: RouterFactory,
                                                echo_origin: AiohttpServer,
                                                proxy_sessions: sessionmaker[Session]) -> None:
    with proxied(start_proxy_router, proxy_sessions, echo_origin.url) as router, \
            router.client("game") as client:
        response = client.get("/", headers=[("cookie", "sid=secret"), ("cookie", "b=2"),
                                            ("x-visible", "1")])
    assert response.status_code == 200
    seen = seen_headers(response)
    assert "cookie" not in names(seen)
    assert ("x-visible", "1") in seen


@pytest.mark.parametrize("size", [10, BIG], ids=["whole", "streamed"])
def test_every_upstream_set_cookie_is_dropped(start_proxy_router: RouterFactory,
                                              proxy_sessions: sessionmaker[Session],
                                              size: int) -> None:
    with aiohttp_origin(("GET", "/", cookie_jar)) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router, \
            router.client("game") as client:
        response = client.get("/", params={"size": size})
    assert response.status_code == 200
    assert response.headers["x-origin"] == "yes"
    assert "set-cookie" not in response.headers
    assert "set-cookie2" not in response.headers
    assert not response.cookies
    assert len(response.content) == size


def answering_with(headers: tuple[tuple[str, str], ...]) -> Callable[
        [web.Request], Awaitable[web.StreamResponse]]:
    """An origin answering ``headers`` (each added as a line of its own) and ``?size=``
    bytes: with a Content-Length up to BIG // 2 (the router's whole-answer path), streamed
    without one above."""
    async def handler(request: web.Request) -> web.StreamResponse:
        size = int(request.query.get("size", "10"))
        response = web.StreamResponse()
        for name, value in headers:
            response.headers.add(name, value)
        response.content_length = size if size <= BIG // 2 else None
        await response.prepare(request)
        await response.write(b"c" * size)
        await response.write_eof()
        return response
    return handler


def answer_through_router(start_proxy_router: RouterFactory,
                          proxy_sessions: sessionmaker[Session],
                          headers: tuple[tuple[str, str], ...], size: int) -> httpx.Response:
    """What a client of the router gets from an origin :func:`answering_with` ``headers``
    and ``size`` bytes (checked whole)."""
    with aiohttp_origin(("GET", "/", answering_with(headers))) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router, \
            router.client("game") as client:
        response = client.get("/", params={"size": size})
    assert response.status_code == 200
    assert len(response.content) == size
    return response


# "cookies" (and "*", which includes it) clears the cookies of the whole registrable
# domain, the portal's and the console's sessions too; the rest stays on the origin.
SITE_DATA_CLEARING = tuple(
    ("Clear-Site-Data", value) for value in ('"cookies", "storage"', '"*"',
                                             ' "cache" ,"executionContexts"', '"cookies"',
                                             '"Cookies", "clientHints"'))


@pytest.mark.parametrize("size", [10, BIG], ids=["whole", "streamed"])
def test_clear_site_data_never_clears_cookies(start_proxy_router: RouterFactory,
                                              proxy_sessions: sessionmaker[Session],
                                              size: int) -> None:
    response = answer_through_router(start_proxy_router, proxy_sessions,
                                     SITE_DATA_CLEARING, size)
    # Only the types that stay on the runtime's own origin pass, each line on its own.
    assert response.headers.get_list("clear-site-data") == [
        '"storage"', '"cache", "executionContexts"', '"clientHints"']


# nginx, in front of the router (deploy/nginx), acts on these in the answers it relays:
# an internal redirect, buffering the answer to disk despite `proxy_buffering off`, ...
EDGE_CONTROLS = (("X-Accel-Redirect", "/svc-auth-return?app=game&code=forged-code"),
                 ("X-Accel-Buffering", "yes"), ("X-Accel-Limit-Rate", "1"),
                 ("X-Accel-Expires", "86400"), ("X-Accel-Charset", "utf-8"))


@pytest.mark.parametrize("size", [10, BIG], ids=["whole", "streamed"])
def test_an_origin_cannot_steer_the_edge_proxy(start_proxy_router: RouterFactory,
                                               proxy_sessions: sessionmaker[Session],
                                               size: int) -> None:
    response = answer_through_router(start_proxy_router, proxy_sessions,
                                     (*EDGE_CONTROLS, ("X-Origin", "yes")), size)
    assert response.headers["x-origin"] == "yes"
    assert not [name for name in response.headers if name.startswith("x-accel-")]


# Alternative services for the app's host name, ours: a browser would remember them (24 h
# by default, across networks with persist=1) and open its next connections to the app's
# host there, on whatever port or host the origin names.
ALT_SVC = (("Alt-Svc", 'h3=":8443"; ma=2592000; persist=1'),
           ("Alt-Svc", 'h2="alt.origin.example:443"'), ("alt-svc", "clear"))


@pytest.mark.parametrize("size", [10, BIG], ids=["whole", "streamed"])
def test_an_origin_cannot_advertise_alternative_services(start_proxy_router: RouterFactory,
                                                         proxy_sessions: sessionmaker[Session],
                                                         size: int) -> None:
    response = answer_through_router(start_proxy_router, proxy_sessions,
                                     (*ALT_SVC, ("X-Origin", "yes")), size)
    assert response.headers["x-origin"] == "yes"
    assert "alt-svc" not in response.headers


# -- 2. hop-by-hop --------------------------------------------------------------------------

def test_hop_by_hop_request_headers_are_removed(start_proxy_router: RouterFactory,
                                                echo_origin: AiohttpServer,
                                                proxy_sessions: sessionmaker[Session]) -> None:
    sent = [
        ("connection", "keep-alive, X-Secret-Hop"), ("connection", "x-other-hop"),
        ("x-secret-hop", "1"), ("x-other-hop", "2"), ("keep-alive", "timeout=5"),
        ("te", "trailers"), ("trailer", "X-Checksum"), ("upgrade", "h2c"),
        ("proxy-authorization", "Basic dXNlcjpwYXNz"), ("proxy-connection", "keep-alive"),
        ("proxy-authenticate", "Basic"), ("x-end-to-end", "kept"),
    ]
    with proxied(start_proxy_router, proxy_sessions, echo_origin.url) as router, \
            router.client("game") as client:
        response = client.post("/hop", headers=sent, content=b"body")
    assert response.status_code == 200
    seen = seen_headers(response)
    leaked = {*HOP_BY_HOP, "x-secret-hop", "x-other-hop"} & set(names(seen))
    assert not leaked, leaked
    assert ("x-end-to-end", "kept") in seen
    assert response.json()["body_len"] == 4


async def odd_headers(origin: RawOrigin, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
    while True:
        await origin.read_head(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\n"
            b"Content-Length: 2\r\n"
            b"Content-Type: text/plain\r\n"
            b"Connection: keep-alive, X-Secret-Hop\r\n"
            b"Connection: X-Other-Hop\r\n"
            b"X-Secret-Hop: 1\r\n"
            b"X-Other-Hop: 2\r\n"
            b"Keep-Alive: timeout=5, max=100\r\n"
            b"Proxy-Connection: keep-alive\r\n"
            b"Proxy-Authenticate: Basic realm=\"origin\"\r\n"
            b"Proxy-Authorization: Basic dXNlcjpwYXNz\r\n"
            b"Upgrade: h2c\r\n"
            b"Trailer: X-Checksum\r\n"
            b"TE: trailers\r\n"
            b"X-End-To-End: kept\r\n"
            b"\r\n"
            b"ok")
        await writer.drain()


def test_hop_by_hop_response_headers_are_removed(start_proxy_router: RouterFactory,
                                                 proxy_sessions: sessionmaker[Session]) -> None:
    with RawOrigin(odd_headers) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router, \
            router.client("game") as client:
        response = client.get("/")
    assert response.status_code == 200
    assert response.content == b"ok"
    assert response.headers["x-end-to-end"] == "kept"
    received = set(response.headers.keys())
    assert not ({*HOP_BY_HOP, "x-secret-hop", "x-other-hop"} - {"connection"}) & received
    # uvicorn may add its own Connection: close/keep-alive; the origin's never passes.
    assert "x-secret-hop" not in response.headers.get("connection", "").lower()


# -- 3. forwarding headers ----------------------------------------------------------------

OURS = [("x-forwarded-for", "6.6.6.6"), ("x-forwarded-for", "7.7.7.7"),
        ("x-forwarded-proto", "https"), ("x-forwarded-host", "evil.example")]
# Every other forwarding claim the router knows (docs/router.md): what frameworks read for
# the client's address, scheme, host, port or path.
OTHERS = [("x-forwarded-port", "443"), ("forwarded", "for=6.6.6.6;proto=https"),
          ("x-real-ip", "6.6.6.6"), ("x-forwarded-prefix", "/evil"),
          ("x-forwarded-path", "/evil"), ("x-forwarded-ssl", "on"),
          ("x-forwarded-scheme", "https"), ("x-forwarded-protocol", "https"),
          ("front-end-https", "on"), ("x-url-scheme", "https"),
          ("x-forwarded-server", "evil.example"), ("x-forwarded", "for=6.6.6.6"),
          ("forwarded-for", "6.6.6.6"), ("x-original-forwarded-for", "6.6.6.6"),
          ("client-ip", "6.6.6.6"), ("x-client-ip", "6.6.6.6"), ("true-client-ip", "6.6.6.6"),
          ("cf-connecting-ip", "6.6.6.6"), ("fastly-client-ip", "6.6.6.6"),
          ("x-cluster-client-ip", "6.6.6.6"), ("x-original-url", "/evil"),
          ("x-rewrite-url", "/evil"), ("x-original-uri", "/evil"),
          ("x-forwarded-uri", "/evil")]
FORGED = OURS + OTHERS
CLAIM_NAMES = frozenset(name for name, _ in FORGED)


def claims_seen(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return sorted((n, v) for n, v in headers if n in CLAIM_NAMES or n.startswith("x-forwarded"))


def test_forwarding_claims_of_an_untrusted_client_are_replaced(
        start_proxy_router: RouterFactory, echo_origin: AiohttpServer,
        proxy_sessions: sessionmaker[Session]) -> None:
    trusted = (ipaddress.ip_network("127.0.0.2/32"),)
    listed = [*FORGED, ("connection", ", ".join(name for name, _ in OTHERS[::2]))]
    with proxied(start_proxy_router, proxy_sessions, echo_origin.url,
                 trusted_proxies=trusted) as router, \
            router.client("game") as client:
        response = client.get("/", headers=FORGED)
        # A body: past the fast path's limit, the request takes uvicorn's path.
        streamed = client.post("/", headers=FORGED, content=b"x" * (BIG + 1))
        named = client.get("/", headers=listed)
        bare = client.get("/")
    assert streamed.json()["body_len"] == BIG + 1
    for answer in (response, streamed, named, bare):
        assert claims_seen(seen_headers(answer)) == [
            ("x-forwarded-for", "127.0.0.1"), ("x-forwarded-host", router.host("game")),
            ("x-forwarded-proto", "http")]


def test_underscore_spellings_of_the_names_we_drop_are_dropped(
        start_proxy_router: RouterFactory, echo_origin: AiohttpServer,
        proxy_sessions: sessionmaker[Session]) -> None:
    """Servers that build a CGI environ (Puma before 6.4.3, gunicorn before 22, CGI itself)
    read ``X_Forwarded_For`` as ``X-Forwarded-For`` (CVE-2024-45614) and
    ``Transfer_Encoding`` as ``Transfer-Encoding``: a claim or a framing of the client's
    own, past the rules of the names as dashed."""
    underscored = [(name.replace("-", "_").title(), value) for name, value in FORGED] + [
        ("Transfer_Encoding", "chunked"), ("Content_Length", "0"), ("Cookie_", "kept"),
        ("Proxy_Authorization", "Basic dXNlcjpwYXNz"), ("Keep_Alive", "1"), ("X_Custom", "kept")]
    with proxied(start_proxy_router, proxy_sessions, echo_origin.url) as router, \
            router.client("game") as client:
        fast = client.get("/", headers=underscored)
        streamed = client.post("/", headers=underscored, content=b"x" * (BIG + 1))
    assert streamed.json()["body_len"] == BIG + 1
    for answer in (fast, streamed):
        seen = seen_headers(answer)
        assert [name for name, _ in seen if "_" in name] == ["cookie_", "x_custom"]
        assert claims_seen(seen) == [
            ("x-forwarded-for", "127.0.0.1"), ("x-forwarded-host", router.host("game")),
            ("x-forwarded-proto", "http")]


def test_a_trusted_proxy_vouches_for_the_chain_proto_and_host_only(
        start_proxy_router: RouterFactory, echo_origin: AiohttpServer,
        proxy_sessions: sessionmaker[Session]) -> None:
    trusted = (ipaddress.ip_network("127.0.0.2/32"),)
    transport = httpx.HTTPTransport(local_address="127.0.0.2")
    with proxied(start_proxy_router, proxy_sessions, echo_origin.url,
                 trusted_proxies=trusted) as router, \
            router.client("game", transport=transport) as client:
        response = client.get("/", headers=FORGED)
        streamed = client.post("/", headers=FORGED, content=b"x" * (BIG + 1))
        bare = client.get("/")
    # The chain extended and the first proto and host believed. Every other claim is
    # dropped as from a client: a stock nginx passes the client's own X-Real-IP or
    # X-Original-URL on unless told otherwise, so the proxy vouches for none of them.
    for answer in (response, streamed):
        assert claims_seen(seen_headers(answer)) == [
            ("x-forwarded-for", "6.6.6.6, 7.7.7.7, 127.0.0.2"),
            ("x-forwarded-host", "evil.example"), ("x-forwarded-proto", "https")]
    seen_bare = dict(seen_headers(bare))
    assert seen_bare["x-forwarded-for"] == "127.0.0.2"
    assert seen_bare["x-forwarded-proto"] == "http"
    assert seen_bare["x-forwarded-host"] == router.host("game")


# -- 4. method, path, query, Host ---------------------------------------------------------

@pytest.mark.parametrize("target", [
    "/a%2Fb/c?q=%20x&q=2",
    "/caf%C3%A9/%7Euser;v=1?x=a+b&y=%2F&&z=",
    "/double//slash/?",
    "/",
])
def test_method_path_and_query_reach_the_origin_unchanged(
        start_proxy_router: RouterFactory, echo_origin: AiohttpServer,
        proxy_sessions: sessionmaker[Session], target: str) -> None:
    port = echo_origin.port
    with proxied(start_proxy_router, proxy_sessions, echo_origin.url) as router, \
            router.client("game") as client:
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "PURGE"):
            response = client.request(method, target)
            assert response.status_code == 200, method
            assert response.request.url.raw_path.decode() == target  # httpx sent it as is
            answer = response.json()
            assert answer["method"] == method
            assert answer["path_qs"] == target.rstrip("?")  # an empty query is no query
            hosts = [v for n, v in seen_headers(response) if n == "host"]
            assert hosts == [f"127.0.0.1:{port}"]


def test_a_request_body_reaches_the_origin(start_proxy_router: RouterFactory,
                                           echo_origin: AiohttpServer,
                                           proxy_sessions: sessionmaker[Session]) -> None:
    with proxied(start_proxy_router, proxy_sessions, echo_origin.url) as router, \
            router.client("game") as client:
        response = client.put("/upload", content=b"x" * 1000)
    seen = dict(seen_headers(response))
    assert response.json()["body_len"] == 1000
    assert seen["content-length"] == "1000"


# -- 5. Server and Date -------------------------------------------------------------------

ORIGIN_DATE = "Tue, 01 Jan 2030 00:00:00 GMT"


async def branded(request: web.Request) -> web.StreamResponse:
    headers = {"Server": "origin-server/1.0", "Date": ORIGIN_DATE}
    if request.query.get("stream"):
        response = web.StreamResponse(headers=headers)
        await response.prepare(request)
        await response.write(b"s" * BIG)
        await response.write_eof()
        return response
    return web.Response(body=b"small", headers=headers)


@pytest.mark.parametrize("query", ["", "?stream=1"], ids=["whole", "streamed"])
def test_server_and_date_are_the_origins_only(start_proxy_router: RouterFactory,
                                              proxy_sessions: sessionmaker[Session],
                                              query: str) -> None:
    with aiohttp_origin(("GET", "/", branded)) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router, \
            router.client("game") as client:
        response = client.get("/" + query)
    assert response.status_code == 200
    assert response.headers.get_list("server") == ["origin-server/1.0"]
    assert response.headers.get_list("date") == [ORIGIN_DATE]


# -- 6. Content-Encoding ------------------------------------------------------------------

SMALL_GZIP = gzip.compress(b"hello " * 500)
LARGE_GZIP = gzip.compress(os.urandom(BIG))  # incompressible: stays above SMALL_BODY


def gzip_origin(accept_seen: list[str | None]) -> AbstractContextManager[AiohttpServer]:
    async def handler(request: web.Request) -> web.Response:
        accept_seen.append(request.headers.get("Accept-Encoding"))
        body = LARGE_GZIP if request.query.get("large") else SMALL_GZIP
        return web.Response(body=body, headers={"Content-Encoding": "gzip",
                                                "Content-Type": "text/plain"})
    return aiohttp_origin(("GET", "/", handler))


@pytest.mark.parametrize(("query", "payload"), [("", SMALL_GZIP), ("?large=1", LARGE_GZIP)],
                         ids=["whole", "streamed"])
def test_compressed_bodies_pass_through_byte_for_byte(start_proxy_router: RouterFactory,
                                                      proxy_sessions: sessionmaker[Session],
                                                      query: str, payload: bytes) -> None:
    accept_seen: list[str | None] = []
    with gzip_origin(accept_seen) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router:
        with plain_client(router) as client, client.stream("GET", "/" + query) as response:
            raw = b"".join(response.iter_raw())
            assert response.headers["content-encoding"] == "gzip"
            assert response.headers["content-length"] == str(len(payload))
        with router.client("game") as client:
            asked = client.get("/" + query, headers={"accept-encoding": "br, gzip"})
    assert raw == payload
    assert asked.content == gzip.decompress(payload)
    assert accept_seen == [None, "br, gzip"]


# -- 7. redirects ---------------------------------------------------------------------------

def test_redirects_reach_the_client_unfollowed(start_proxy_router: RouterFactory,
                                               proxy_sessions: sessionmaker[Session]) -> None:
    landed: list[str] = []

    async def redirect(request: web.Request) -> web.Response:
        status = int(request.match_info["status"])
        location = request.query["to"]
        return web.Response(status=status, headers={"Location": location})

    async def landing(request: web.Request) -> web.Response:
        landed.append(request.path_qs)
        return web.Response(text="landed")

    with aiohttp_origin(("*", "/go/{status}", redirect), ("*", "/landing", landing)) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router, \
            router.client("game") as client:
        for status in (301, 302, 303, 307, 308):
            for location in ("/landing?x=%20", f"{origin.url}/landing",
                             "https://elsewhere.example/p?q=1"):
                response = client.post(f"/go/{status}", params={"to": location})
                assert response.status_code == status
                assert response.headers.get_list("location") == [location]
    assert landed == []


# -- 15. body-less answers ----------------------------------------------------------------

def test_head_and_bodyless_statuses_carry_no_body(start_proxy_router: RouterFactory,
                                                  proxy_sessions: sessionmaker[Session]) -> None:
    methods: list[str] = []

    async def resource(request: web.Request) -> web.Response:
        methods.append(request.method)
        size = int(request.query.get("size", "1000"))
        if request.headers.get("If-None-Match") == '"v1"':
            return web.Response(status=304, headers={"ETag": '"v1"'})
        return web.Response(body=b"r" * size, headers={"ETag": '"v1"'})

    async def empty(request: web.Request) -> web.Response:
        return web.Response(status=204, headers={"X-Done": "1"})

    with aiohttp_origin(("*", "/r", resource), ("*", "/empty", empty)) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router, \
            router.client("game") as client:
        for size in (1000, BIG):
            head = client.head("/r", params={"size": size})
            assert head.status_code == 200
            assert head.content == b""
            assert head.headers["content-length"] == str(size)
            # The connection is still framed correctly: the next answer is whole.
            assert client.get("/r", params={"size": size}).content == b"r" * size
        not_modified = client.get("/r", headers={"If-None-Match": '"v1"'})
        assert not_modified.status_code == 304
        assert not_modified.content == b""
        assert not_modified.headers["etag"] == '"v1"'
        no_content = client.delete("/empty")
        assert no_content.status_code == 204
        assert no_content.content == b""
        assert no_content.headers["x-done"] == "1"
        assert client.get("/r").content == b"r" * 1000
    assert methods.count("HEAD") == 2
