"""Held writes: one write per response when head and body come together, order kept; the
fast protocol's one-write answers are the bytes uvicorn's send would write."""

from __future__ import annotations

import asyncio
import logging

import pytest
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from router.headers import Headers
from router.server_protocol import HeldWrites, frame_whole


class Recorder:
    def __init__(self) -> None:
        self.sends: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.sends.append(data)

    def writelines(self, parts: tuple[bytes, ...]) -> None:
        self.sends.append(b"".join(parts))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def test_a_head_leaves_with_its_body_and_alone_at_the_end_of_the_iteration() -> None:
    async def main() -> list[bytes]:
        transport = Recorder()
        writes = HeldWrites(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
        writes.write(b"head1")
        writes.write(b"body1")
        assert transport.sends == [b"head1body1"]
        writes.write(b"head2")  # a streamed answer whose body is not there yet
        assert transport.sends == [b"head1body1"]
        await asyncio.sleep(0)
        writes.write(b"chunk")
        writes.write(b"last")
        writes.write(b"head3")
        writes.close()  # what was held goes before the close
        assert transport.closed
        return transport.sends

    assert asyncio.run(main()) == [b"head1body1", b"head2", b"chunklast", b"head3"]


# -- frame_whole: uvicorn's send of a start and a final body, in one write -------------------

def cycle_on(transport: Recorder, method: str = "GET",
             keep_alive: bool = True) -> RequestResponseCycle:
    scope = {"type": "http", "method": method, "path": "/", "http_version": "1.1"}
    return RequestResponseCycle(
        scope=scope,  # type: ignore[arg-type]
        transport=transport,  # type: ignore[arg-type]
        flow=FlowControl(transport),  # type: ignore[arg-type]
        logger=logging.getLogger("test"), access_logger=logging.getLogger("test.access"),
        access_log=False, default_headers=[], message_event=asyncio.Event(),
        expect_100_continue=False, keep_alive=keep_alive, on_response=lambda: None)


def through_send(method: str, keep_alive: bool, status: int, headers: Headers,
                 body: bytes) -> tuple[bytes, bool]:
    async def main() -> tuple[bytes, bool]:
        transport = Recorder()
        cycle = cycle_on(transport, method, keep_alive)
        await cycle.send({"type": "http.response.start", "status": status, "headers": headers})
        await cycle.send({"type": "http.response.body", "body": body})
        return b"".join(transport.sends), transport.closed
    return asyncio.run(main())


def through_frame_whole(method: str, keep_alive: bool, status: int, headers: Headers,
                        body: bytes) -> tuple[bytes, bool] | None:
    """What the fast protocol writes: the framed answer, closing unless kept alive."""
    data = frame_whole(status, headers, body, [], head_only=method == "HEAD",
                       keep_alive=keep_alive)
    return None if data is None else (data, not keep_alive)


PLAIN: Headers = [(b"server", b"origin"), (b"content-type", b"text/plain"),
                  (b"content-length", b"5")]


@pytest.mark.parametrize(("method", "keep_alive", "status", "headers", "body"), [
    ("GET", True, 200, PLAIN, b"hello"),
    ("GET", False, 200, PLAIN, b"hello"),  # HTTP/1.0 or Connection: close
    ("HEAD", True, 200, PLAIN, b""),
    ("GET", True, 204, [(b"x-a", b"1")], b""),
    ("GET", True, 304, [(b"etag", b'"x"')], b""),
    ("GET", True, 299, PLAIN, b"hello"),
    ("GET", True, 204, [], b""),  # no header at all
    ("HEAD", False, 200, PLAIN, b""),
    ("GET", True, 200, [(b"content-length", b"5"), (b"x-a", b"1"), (b"content-length", b"7")],
     b"hello"),  # the first length frames the body, as send reads it
])
def test_frame_whole_writes_what_send_writes(method: str, keep_alive: bool, status: int,
                                             headers: Headers, body: bytes) -> None:
    assert through_frame_whole(method, keep_alive, status, headers, body) == \
        through_send(method, keep_alive, status, headers, body)


@pytest.mark.parametrize(("status", "headers", "body"), [
    (200, [(b"content-type", b"text/plain")], b"hello"),  # send would frame chunks
    (200, [(b"content-length", b"9")], b"hello"),  # send would fail the length
    (200, [(b"x-bad", b"a\x01b"), (b"content-length", b"5")], b"hello"),  # send refuses
    (200, [(b"x bad", b"1"), (b"content-length", b"5")], b"hello"),
    (200, [(b"connection", b"close"), (b"content-length", b"5")], b"hello"),
    (600, [(b"content-length", b"5")], b"hello"),
])
def test_frame_whole_leaves_anything_else_to_send(status: int, headers: Headers,
                                                  body: bytes) -> None:
    assert through_frame_whole("GET", True, status, headers, body) is None


def test_checked_values_are_remembered_within_bounds_and_bad_ones_never() -> None:
    from router import server_protocol

    short, long = b"text/plain; x=1", b"v" * (server_protocol.MAX_VALID_VALUE_LENGTH + 1)
    for _ in range(2):  # the second pass answers from what the first remembered
        framed = frame_whole(200, [(b"x-a", short), (b"x-b", long), (b"content-length", b"0")],
                             b"", [], head_only=False, keep_alive=True)
        assert framed is not None and b"x-a: " + short + b"\r\n" in framed
        bad = frame_whole(200, [(b"x-c", b"a\x01b"), (b"content-length", b"0")], b"", [],
                          head_only=False, keep_alive=True)
        assert bad is None
    assert short in server_protocol._VALID_VALUES
    assert long not in server_protocol._VALID_VALUES  # long values are checked every time
    assert b"a\x01b" not in server_protocol._VALID_VALUES
