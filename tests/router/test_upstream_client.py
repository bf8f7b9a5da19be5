"""The proxy's own HTTP/1.1 client against hand-written origins on loopback.

Framing (length, chunks, end of connection, HEAD, 1xx, 204/304), keep-alive and
``Connection: close``, TLS with SNI, timeouts and the address check, under uvloop as the
router runs it.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import trustme
import uvloop

from router.head_limits import HeadLimits
from router.headers import Headers
from router.origin import CheckedResolver, Origin, OriginAddressRefused, parse_origin
from router.origin_errors import (
    OriginConnectTimeout,
    OriginProtocolError,
    OriginTimeout,
    OriginUnreachable,
)
from router.upstream_client import TICK, UpstreamClient
from tests.router.origins import RawOrigin, closed_port, full_queue

T = TypeVar("T")


def run(job: Callable[[UpstreamClient], Awaitable[T]], *, allow_private: bool = True,
        read_timeout: float = 5.0, connect_timeout: float = 2.0,
        ssl_context: ssl.SSLContext | None = None) -> T:
    async def main() -> T:
        client = UpstreamClient(connect_timeout=connect_timeout, read_timeout=read_timeout,
                                max_idle=8,
                                resolver=CheckedResolver(allow_private),
                                ssl_context=ssl_context)
        try:
            return await job(client)
        finally:
            await client.close()
    return uvloop.run(main())


def origin_at(url: str, allow_private: bool = True) -> Origin:
    origin = parse_origin(url, allow_private)
    assert origin is not None
    return origin


async def fetch(client: UpstreamClient, url: str, method: str = "GET",
                allow_private: bool = True) -> tuple[int, Headers, bytes]:
    origin = origin_at(url, allow_private)
    response = await client.request(origin, method, b"/", [(b"host", origin.host_bytes)])
    try:
        return response.status, response.headers, await response.read()
    finally:
        response.release()


def answering(*answers: bytes, close: bool = False) -> RawOrigin:
    """Answers the requests of each connection with ``answers`` in turn."""
    async def handle(origin: RawOrigin, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        for answer in answers:
            await origin.read_head(reader)
            writer.write(answer)
            await writer.drain()
        if not close:
            await reader.read()
    return RawOrigin(handle)


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def test_keep_alive_connections_are_reused() -> None:
    with answering(OK, OK, OK) as origin:
        async def three(client: UpstreamClient) -> list[bytes]:
            return [(await fetch(client, origin.url))[2] for _ in range(3)]
        assert run(three) == [b"ok"] * 3
    assert origin.connections == 1


def test_a_connection_opened_for_nobody_is_kept_for_the_next_request() -> None:
    # What a fast exchange does with a connection that opened as its client left.
    with answering(OK) as origin:
        async def kept(client: UpstreamClient) -> bytes:
            client.keep(await client.opening(origin_at(origin.url)))
            return (await fetch(client, origin.url))[2]
        assert run(kept) == b"ok"
    assert origin.connections == 1  # the request went on the kept connection


def test_connection_close_is_honoured() -> None:
    closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
    with answering(closing, close=True) as origin:
        async def two(client: UpstreamClient) -> list[int]:
            return [(await fetch(client, origin.url))[0] for _ in range(2)]
        assert run(two) == [200, 200]
    assert origin.connections == 2


@pytest.mark.parametrize(("answer", "close", "body"), [
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", False, b"hello world"),
    (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end", True,
     b"until the end"),
    (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n"
     b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Final: 1\r\n\r\nfinal", False, b"final"),
], ids=["chunked", "until-close", "informational"])
def test_bodies_are_framed_as_the_origin_said(answer: bytes, close: bool, body: bytes) -> None:
    with answering(answer, close=close) as origin:
        status, headers, received = run(lambda client: fetch(client, origin.url))
    assert (status, received) == (200, body)
    assert b"Link" not in dict(headers)


def test_head_and_bodyless_statuses_keep_the_connection() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
    no_content = b"HTTP/1.1 204 No Content\r\nX-Done: 1\r\n\r\n"
    not_modified = b"HTTP/1.1 304 Not Modified\r\nContent-Length: 1000\r\n\r\n"
    with answering(head, no_content, not_modified, OK) as origin:
        async def four(client: UpstreamClient) -> list[tuple[int, bytes]]:
            answers = []
            for method in ("HEAD", "DELETE", "GET", "GET"):
                status, _, body = await fetch(client, origin.url, method)
                answers.append((status, body))
            return answers
        assert run(four) == [(200, b""), (204, b""), (304, b""), (200, b"ok")]
    assert origin.connections == 1


class TlsOrigin(RawOrigin):
    def __init__(self, context: ssl.SSLContext, *args: Any) -> None:
        super().__init__(*args)
        self.context = context

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._connected, "127.0.0.1", self.port,
                                                  ssl=self.context)


def test_tls_carries_the_origin_name_as_sni_and_checks_it() -> None:
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server)
    names: list[str | None] = []
    server.sni_callback = lambda sock, name, ctx: names.append(name)
    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)

    async def handle(origin: RawOrigin, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        await origin.read_head(reader)
        writer.write(OK)
        await writer.drain()
        await reader.read()

    with TlsOrigin(server, handle) as origin:
        url = f"https://localhost:{origin.port}"
        status, _, body = run(lambda client: fetch(client, url), ssl_context=trusting)
        with pytest.raises(OriginUnreachable):  # the default trust store knows no test CA
            run(lambda client: fetch(client, url))
    assert (status, body) == (200, b"ok")
    assert names[0] == "localhost"


def test_an_origin_that_never_answers_times_out() -> None:
    async def silent(origin: RawOrigin, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        await origin.read_head(reader)
        await asyncio.Event().wait()

    with RawOrigin(silent) as origin, pytest.raises(OriginTimeout):
        run(lambda client: fetch(client, origin.url), read_timeout=0.3)


def test_a_connect_not_done_in_time_is_a_connect_timeout_and_leaves_its_task_uncancelled(
        ) -> None:
    """The sweep cancels the connect past its deadline, at most a tick late; the task that
    waited for it gets OriginConnectTimeout and goes on, its cancel taken back."""
    async def timed(client: UpstreamClient) -> tuple[float, int]:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(OriginConnectTimeout):
            await fetch(client, queue.url)
        elapsed = loop.time() - started
        await asyncio.sleep(0.01)  # a cancel left pending would be raised here
        return elapsed, task.cancelling()

    with full_queue() as queue:
        elapsed, cancelling = run(timed, connect_timeout=0.3)
    assert 0.3 <= elapsed < 0.3 + TICK + 0.3
    assert cancelling == 0


def test_a_connect_cancelled_by_its_owner_as_it_times_out_is_cancelled() -> None:
    """The sweep and the task's owner (a client that left) cancel it in the same turn: as
    with ``asyncio.timeout``, the owner's cancel is what the owner sees."""
    async def both(client: UpstreamClient) -> tuple[bool, bool]:
        opening = client.opening(origin_at(queue.url))
        await asyncio.sleep(0)  # the connect is pending, the sweep is due
        sweeper = client._sweeper
        assert sweeper is not None
        # Due at the same time and scheduled after it: runs right after the sweep.
        asyncio.get_running_loop().call_at(sweeper.when(), opening.cancel)
        with pytest.raises(asyncio.CancelledError):
            await opening
        return opening.cancelled(), not client._connecting

    with full_queue() as queue:
        assert run(both, connect_timeout=0.01) == (True, True)


def test_a_connect_still_times_out_once_the_client_is_closed() -> None:
    """Closing the client (the service shutting down) keeps the sweep for connects still
    in flight, so theirs still time out rather than wait out the kernel's SYN retries."""
    async def closed(client: UpstreamClient) -> None:
        opening = client.opening(origin_at(queue.url))
        await asyncio.sleep(0)  # the connect is pending
        await client.close()
        with pytest.raises(OriginConnectTimeout):
            await asyncio.wait_for(opening, 2.0)

    with full_queue() as queue:
        run(closed, connect_timeout=0.2)


def test_unreachable_and_private_origins_fail_without_a_request() -> None:
    with pytest.raises(OriginUnreachable):
        run(lambda client: fetch(client, f"http://127.0.0.1:{closed_port()}"))
    with answering(OK) as origin:
        named = f"http://localhost:{origin.port}"
        with pytest.raises(OriginAddressRefused):
            run(lambda client: fetch(client, named, allow_private=False),
                allow_private=False)
        assert origin.connections == 0
        assert run(lambda client: fetch(client, named))[2] == b"ok"


def _with_headers(count: int, value: bytes = b"v") -> bytes:
    lines = b"".join(b"X-H%d: %b\r\n" % (i, value) for i in range(count))
    return b"HTTP/1.1 200 OK\r\n" + lines + b"Content-Length: 2\r\n\r\nok"


@pytest.mark.parametrize(("answer", "refused"), [
    # A short head (one read, under the line limit) is still held to the line count.
    (_with_headers(HeadLimits().headers - 1), False),
    (_with_headers(HeadLimits().headers), True),
    (_with_headers(150), True),
    # One line over the limit, in a head that arrives whole.
    (_with_headers(1, b"v" * (HeadLimits().header_line - 7)), False),
    (_with_headers(1, b"v" * HeadLimits().header_line), True),
], ids=["99-lines", "100-lines-and-length", "150-lines", "line-at-limit", "line-over-limit"])
def test_an_answer_head_is_held_to_the_line_limits(answer: bytes, refused: bool) -> None:
    with answering(answer) as origin:
        async def one(client: UpstreamClient) -> tuple[int, Headers, bytes] | str:
            try:
                return await fetch(client, origin.url)
            except OriginProtocolError as exc:
                return str(exc)
        got = run(one)
    if refused:
        assert isinstance(got, str) and "over" in got
    else:
        assert not isinstance(got, str) and got[0] == 200 and got[2] == b"ok"
