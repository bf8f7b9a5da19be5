"""Origins that hang, vanish, break off or send too much; clients that send too much."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from aiohttp import web
from sqlalchemy.orm import Session, sessionmaker

from tests.router.origins import RawOrigin, aiohttp_origin, closed_port, proxied
from tests.support.router import RouterFactory
from tests.support.servers import AiohttpServer

READ_TIMEOUT = 0.5
REQUEST_LIMIT = 16 * 1024
RESPONSE_LIMIT = 100_000


# -- 10. timeouts and unreachable origins ---------------------------------------------------

async def never_answers(origin: RawOrigin, reader: asyncio.StreamReader,
                        writer: asyncio.StreamWriter) -> None:
    await origin.read_head(reader)
    await asyncio.Event().wait()


async def hangs_up(origin: RawOrigin, reader: asyncio.StreamReader,
                   writer: asyncio.StreamWriter) -> None:
    await origin.read_head(reader)


async def talks_nonsense(origin: RawOrigin, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
    await origin.read_head(reader)
    writer.write(b"SPEAKING FTP HERE\r\n\r\n")
    await writer.drain()


def test_an_origin_that_never_answers_gets_a_504(start_proxy_router: RouterFactory,
                                                 proxy_sessions: sessionmaker[Session]) -> None:
    with RawOrigin(never_answers) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url,
                    proxy_read_timeout=READ_TIMEOUT) as router, \
            router.client("game") as client:
        for method, body in (("GET", None), ("POST", b"payload")):
            started = time.monotonic()
            response = client.request(method, "/slow", content=body)
            elapsed = time.monotonic() - started
            assert response.status_code == 504, method
            assert "did not answer in time" in response.text
            assert READ_TIMEOUT * 0.8 < elapsed < READ_TIMEOUT + 2.0
    assert origin.connections == 2


def test_an_unreachable_origin_gets_a_502(start_proxy_router: RouterFactory,
                                          proxy_sessions: sessionmaker[Session]) -> None:
    with proxied(start_proxy_router, proxy_sessions, f"http://127.0.0.1:{closed_port()}",
                 proxy_read_timeout=READ_TIMEOUT) as router, router.client("game") as client:
        started = time.monotonic()
        response = client.get("/")
        elapsed = time.monotonic() - started
        post = client.post("/", content=b"x")
    assert response.status_code == 502
    assert "could not be reached" in response.text
    assert elapsed < 2.0
    assert post.status_code == 502


def test_an_origin_that_hangs_up_gets_a_502(start_proxy_router: RouterFactory,
                                            proxy_sessions: sessionmaker[Session]) -> None:
    with RawOrigin(hangs_up) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router, \
            router.client("game") as client:
        get = client.get("/")
        tried_for_get = origin.connections
        post = client.post("/", content=b"not replayed")
        tried_for_post = origin.connections - tried_for_get
    assert get.status_code == 502
    assert post.status_code == 502
    assert "could not be reached" in post.text
    # A bodyless idempotent request is retried once (a closed keep-alive connection
    # looks the same as this), and only once; a POST never is.
    assert tried_for_get == 2
    assert tried_for_post == 1


def test_an_origin_that_is_not_http_gets_a_502(start_proxy_router: RouterFactory,
                                               proxy_sessions: sessionmaker[Session]) -> None:
    with RawOrigin(talks_nonsense) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router, \
            router.client("game") as client:
        response = client.get("/")
    assert response.status_code == 502


def breaks_off(declared: int, sent: int) -> RawOrigin:
    async def handle(origin: RawOrigin, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        await origin.read_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % declared)
        writer.write(b"b" * sent)
        await writer.drain()
    return RawOrigin(handle)


def drain(client: httpx.Client, url: str, into: bytearray, headers: dict[str, str]) -> None:
    """Read a streamed 200 answer raw into ``into``, whatever happens to it midway."""
    with client.stream("GET", url) as response:
        assert response.status_code == 200
        headers.update(response.headers)
        for chunk in response.iter_raw():
            into += chunk


def test_an_origin_breaking_off_a_small_answer_gets_a_502(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session]) -> None:
    with breaks_off(declared=1000, sent=10) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router, \
            router.client("game") as client:
        response = client.get("/")
    assert response.status_code == 502
    assert "broke off" in response.text


def test_an_origin_breaking_off_a_streamed_answer_cuts_the_client(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session]) -> None:
    received = bytearray()
    headers: dict[str, str] = {}
    with breaks_off(declared=1_000_000, sent=200_000) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router, \
            router.client("game") as client, pytest.raises(httpx.RemoteProtocolError):
        drain(client, "/", received, headers)
    assert headers["content-length"] == "1000000"
    assert len(received) <= 200_000


# -- 11. size limits ------------------------------------------------------------------------

class Uploads:
    """What an origin saw of uploads: ("complete", n) or ("broken", n) per request."""

    def __init__(self) -> None:
        self.outcomes: list[tuple[str, int]] = []
        self.finished = threading.Event()

    async def handler(self, request: web.Request) -> web.Response:
        total = 0
        try:
            async for chunk in request.content.iter_any():
                total += len(chunk)
        except Exception:
            self.outcomes.append(("broken", total))
            self.finished.set()
            raise
        complete = request.content.is_eof() and not request.content.exception()
        self.outcomes.append(("complete" if complete else "broken", total))
        self.finished.set()
        return web.json_response({"total": total})


@pytest.fixture
def uploads() -> Uploads:
    return Uploads()


@pytest.fixture
def upload_origin(uploads: Uploads) -> Iterator[AiohttpServer]:
    with aiohttp_origin(("POST", "/up", uploads.handler)) as server:
        yield server


def test_a_declared_oversized_upload_gets_a_413_and_never_leaves(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        upload_origin: AiohttpServer, uploads: Uploads) -> None:
    with proxied(start_proxy_router, proxy_sessions, upload_origin.url,
                 proxy_max_request_bytes=REQUEST_LIMIT) as router, \
            router.client("game") as client:
        over = client.post("/up", content=b"o" * (REQUEST_LIMIT + 1))
        at_limit = client.post("/up", content=b"o" * REQUEST_LIMIT)
    assert over.status_code == 413
    assert "larger than this app accepts" in over.text
    assert at_limit.status_code == 200
    assert uploads.outcomes == [("complete", REQUEST_LIMIT)]


def test_a_chunked_oversized_upload_gets_a_413_and_is_cut(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session]) -> None:
    bodies: list[bytearray] = []  # raw chunked bytes each upstream request delivered

    async def collect(origin: RawOrigin, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        while True:
            await origin.read_head(reader)
            received = bytearray()
            bodies.append(received)
            while not received.endswith(b"0\r\n\r\n"):
                data = await reader.read(65536)
                if not data:
                    return  # the router cut the upload
                received += data
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    piece = b"c" * 4096
    with RawOrigin(collect) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url,
                    proxy_max_request_bytes=REQUEST_LIMIT) as router, \
            router.client("game") as client:
        over = client.post("/up", content=iter([piece] * (4 * REQUEST_LIMIT // 4096)))
        at_limit = client.post("/up", content=iter([piece] * (REQUEST_LIMIT // 4096)))
    assert over.status_code == 413
    assert "larger than this app accepts" in over.text
    assert at_limit.status_code == 200
    # The origin may have seen the start of the oversized body, never all of it: the
    # only complete upload it received is the one at the limit.
    complete = [b for b in bodies if b.endswith(b"0\r\n\r\n")]
    assert len(complete) == 1
    assert complete[0].count(b"c") == REQUEST_LIMIT
    assert all(b.count(b"c") <= REQUEST_LIMIT for b in bodies)


async def sized(request: web.Request) -> web.StreamResponse:
    size = int(request.query["size"])
    response = web.StreamResponse()
    if request.query.get("length"):
        response.content_length = size
    await response.prepare(request)
    for start in range(0, size, 10_000):
        await response.write(b"r" * min(10_000, size - start))
    await response.write_eof()
    return response


def test_a_declared_oversized_response_gets_a_502(start_proxy_router: RouterFactory,
                                                  proxy_sessions: sessionmaker[Session]) -> None:
    with aiohttp_origin(("GET", "/r", sized)) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url,
                    proxy_max_response_bytes=RESPONSE_LIMIT) as router, \
            router.client("game") as client:
        over = client.get("/r", params={"size": RESPONSE_LIMIT + 1, "length": 1})
        at_limit = client.get("/r", params={"size": RESPONSE_LIMIT, "length": 1})
    assert over.status_code == 502
    assert "larger than the service relays" in over.text
    assert at_limit.status_code == 200
    assert len(at_limit.content) == RESPONSE_LIMIT


def test_a_streamed_oversized_response_is_cut(start_proxy_router: RouterFactory,
                                              proxy_sessions: sessionmaker[Session]) -> None:
    received = bytearray()
    with aiohttp_origin(("GET", "/r", sized)) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url,
                    proxy_max_response_bytes=RESPONSE_LIMIT) as router, \
            router.client("game") as client:
        with pytest.raises(httpx.RemoteProtocolError):
            drain(client, f"/r?size={3 * RESPONSE_LIMIT}", received, {})
        at_limit = client.get("/r", params={"size": RESPONSE_LIMIT})
    assert len(received) <= RESPONSE_LIMIT
    assert at_limit.status_code == 200
    assert len(at_limit.content) == RESPONSE_LIMIT
