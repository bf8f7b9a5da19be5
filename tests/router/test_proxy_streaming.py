"""Bodies stream through the runtime proxy both ways, and a client leaving closes upstream."""

from __future__ import annotations

import asyncio
import hashlib
import random
import threading
import time
from collections.abc import Iterator

import pytest
from aiohttp import web
from sqlalchemy.orm import Session, sessionmaker

from tests.router.origins import aiohttp_origin, proxied
from tests.support.router import RouterFactory

FIFTY_MB = 50 * 1024 * 1024
FIRST = 64 * 1024
STEP = 1024 * 1024
WAIT = 10.0  # how long either side waits for the other before calling it buffering


@pytest.fixture(scope="module")
def payload() -> bytes:
    return random.Random(50).randbytes(FIFTY_MB)


@pytest.mark.parametrize("with_length", [True, False], ids=["content-length", "chunked"])
def test_a_50mb_response_streams_without_buffering(start_proxy_router: RouterFactory,
                                                   proxy_sessions: sessionmaker[Session],
                                                   payload: bytes, with_length: bool) -> None:
    client_has_first = threading.Event()
    origin_waited: list[bool] = []

    async def download(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        if with_length:
            response.content_length = len(payload)
        await response.prepare(request)
        await response.write(payload[:FIRST])
        # The rest is held back until the client has the first bytes: a proxy that
        # buffered the whole body would leave both sides waiting here.
        released = await asyncio.to_thread(client_has_first.wait, WAIT)
        origin_waited.append(released)
        for start in range(FIRST, len(payload), STEP):
            await response.write(payload[start:start + STEP])
        await response.write_eof()
        return response

    with aiohttp_origin(("GET", "/big", download)) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router, \
            router.client("game") as client, client.stream("GET", "/big") as response:
        assert response.status_code == 200
        chunks = response.iter_raw()
        first = next(chunks)
        assert not origin_waited, "the origin had already finished waiting"
        client_has_first.set()
        digest = hashlib.sha256(first)
        total = len(first)
        for chunk in chunks:
            digest.update(chunk)
            total += len(chunk)
        length_header = response.headers.get("content-length")
    assert origin_waited == [True]
    assert total == len(payload)
    assert digest.hexdigest() == hashlib.sha256(payload).hexdigest()
    assert length_header == (str(len(payload)) if with_length else None)


@pytest.mark.parametrize("with_length", [True, False], ids=["content-length", "chunked"])
def test_a_50mb_upload_streams_without_buffering(start_proxy_router: RouterFactory,
                                                 proxy_sessions: sessionmaker[Session],
                                                 payload: bytes, with_length: bool) -> None:
    origin_has_first = threading.Event()
    client_waited: list[bool] = []

    async def upload(request: web.Request) -> web.Response:
        digest = hashlib.sha256()
        total = 0
        first = await request.content.readany()
        digest.update(first)
        total += len(first)
        origin_has_first.set()
        async for chunk in request.content.iter_any():
            digest.update(chunk)
            total += len(chunk)
        return web.json_response({
            "total": total, "sha256": digest.hexdigest(),
            "content_length": request.headers.get("Content-Length"),
            "chunked": request.headers.get("Transfer-Encoding"),
        })

    def body() -> Iterator[bytes]:
        yield payload[:FIRST]
        # Nothing more is sent until the origin has the first bytes.
        client_waited.append(origin_has_first.wait(WAIT))
        for start in range(FIRST, len(payload), STEP):
            yield payload[start:start + STEP]

    headers = {"content-length": str(len(payload))} if with_length else {}
    with aiohttp_origin(("POST", "/up", upload)) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router, \
            router.client("game") as client:
        response = client.post("/up", content=body(), headers=headers)
    assert client_waited == [True]
    assert response.status_code == 200
    answer = response.json()
    assert answer["total"] == len(payload)
    assert answer["sha256"] == hashlib.sha256(payload).hexdigest()
    if with_length:
        assert answer["content_length"] == str(len(payload))
    else:
        assert answer["content_length"] is None
        assert answer["chunked"] == "chunked"


@pytest.mark.parametrize("sizes", [
    [1, 7, 100, 65536, 3, 1_000_000, 12345],
    [],
], ids=["odd-chunks", "empty"])
def test_a_chunked_upload_arrives_intact(start_proxy_router: RouterFactory,
                                         proxy_sessions: sessionmaker[Session],
                                         sizes: list[int]) -> None:
    rng = random.Random(9)
    chunks = [rng.randbytes(n) for n in sizes]
    expected = b"".join(chunks)

    async def upload(request: web.Request) -> web.Response:
        data = await request.content.read()
        return web.json_response({
            "sha256": hashlib.sha256(data).hexdigest(), "total": len(data),
            "content_length": request.headers.get("Content-Length"),
        })

    with aiohttp_origin(("POST", "/up", upload)) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router, \
            router.client("game") as client:
        response = client.post("/up", content=iter(chunks))
    assert response.request.headers["transfer-encoding"] == "chunked"
    answer = response.json()
    assert answer == {"sha256": hashlib.sha256(expected).hexdigest(), "total": len(expected),
                      "content_length": None}


@pytest.mark.parametrize("with_length", [True, False], ids=["content-length", "chunked"])
def test_a_client_leaving_mid_response_closes_the_upstream(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        with_length: bool) -> None:
    origin_saw_close = threading.Event()
    closed_at: list[float] = []

    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        if with_length:
            response.content_length = 200 * 1024 * 1024  # under the 256 MiB response limit
        await response.prepare(request)
        give_up = time.monotonic() + 10  # "forever", bounded so a failure cannot hang teardown
        try:
            while time.monotonic() < give_up:
                await response.write(b"t" * 4096)
                await asyncio.sleep(0.02)
        except ConnectionError:
            closed_at.append(time.monotonic())
            origin_saw_close.set()
        except asyncio.CancelledError:
            closed_at.append(time.monotonic())
            origin_saw_close.set()
            raise
        return response

    with aiohttp_origin(("GET", "/tick", endless)) as origin, \
            proxied(start_proxy_router, proxy_sessions, origin.url) as router:
        with router.client("game") as client, client.stream("GET", "/tick") as response:
            assert response.status_code == 200
            received = 0
            for chunk in response.iter_raw():
                received += len(chunk)
                if received >= 16 * 1024:
                    break
        left_at = time.monotonic()
        assert origin_saw_close.wait(5), "the origin kept streaming to nobody"
    assert closed_at[0] - left_at < 2.0
