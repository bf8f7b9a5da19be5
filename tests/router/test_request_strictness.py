"""Malformed and ambiguous request heads, sent to both HTTP paths: the fast protocol and
uvicorn's protocol (the fast path off). Each is answered the same way on both; an
ambiguous one is refused with 400 and the connection closed, and the bytes of a second
request hidden in it (request smuggling) never reach the origin.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.factories import add_app
from tests.router.origins import RawOrigin
from tests.router.test_fast_protocol import Answers, body_echo_origin, connect, get
from tests.router.test_head_limits import status_of
from tests.support.router import RouterFactory, RunningRouter

SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: {host}\r\n\r\n"

# (name, request with {host} for the runtime host, the status both paths answer)
CORPUS: list[tuple[str, bytes, int]] = [
    ("content-length-and-chunked",
     b"POST /a HTTP/1.1\r\nHost: {host}\r\nContent-Length: 4\r\nTransfer-Encoding: chunked"
     b"\r\n\r\n0\r\n\r\n" + SMUGGLED, 400),
    ("two-content-lengths",
     b"POST /a HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nContent-Length: 44\r\n\r\n"
     + SMUGGLED, 400),
    ("obs-fold", b"GET /a HTTP/1.1\r\nHost: {host}\r\nX-A: b\r\n c\r\n\r\n" + SMUGGLED, 400),
    ("bare-lf-in-headers", b"GET /a HTTP/1.1\r\nHost: {host}\nX-A: b\r\n\r\n" + SMUGGLED, 400),
    ("nul-in-value", b"GET /a HTTP/1.1\r\nHost: {host}\r\nX-A: b\x00c\r\n\r\n" + SMUGGLED, 400),
    ("cr-in-value", b"GET /a HTTP/1.1\r\nHost: {host}\r\nX-A: b\rc\r\n\r\n" + SMUGGLED, 400),
    ("space-before-colon",
     b"GET /a HTTP/1.1\r\nHost: {host}\r\nContent-Length : 5\r\n\r\n" + SMUGGLED, 400),
    ("bad-chunk-size",
     b"POST /a HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n"
     b"0\r\n\r\n" + SMUGGLED, 400),
    ("chunked-not-last",
     b"POST /a HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked, identity\r\n\r\n"
     b"0\r\n\r\n" + SMUGGLED, 400),
    ("two-hosts", b"GET /a HTTP/1.1\r\nHost: {host}\r\nHost: {host}\r\n\r\n" + SMUGGLED, 400),
    ("no-host", b"GET /a HTTP/1.1\r\nX-A: b\r\n\r\n" + SMUGGLED, 400),
    ("negative-content-length",
     b"POST /a HTTP/1.1\r\nHost: {host}\r\nContent-Length: -1\r\n\r\n" + SMUGGLED, 400),
    # A Content-Length the fast protocol would hold a body for must be one uvicorn's
    # parser accepts: anything but digits is refused, as on the uvicorn path.
    ("plus-content-length",
     b"POST /a HTTP/1.1\r\nHost: {host}\r\nContent-Length: +5\r\n\r\nhello" + SMUGGLED, 400),
    ("non-digit-content-length",
     b"POST /a HTTP/1.1\r\nHost: {host}\r\nContent-Length: 5x\r\n\r\nhello" + SMUGGLED, 400),
    ("content-length-list",
     b"POST /a HTTP/1.1\r\nHost: {host}\r\nContent-Length: 5, 5\r\n\r\nhello" + SMUGGLED,
     400),
    ("hex-content-length",
     b"POST /a HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0x5\r\n\r\nhello" + SMUGGLED,
     400),
    ("content-length-and-chunked-after-a-body",
     b"POST /a HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n"
     b"Content-Length: 3\r\n\r\nabc" + SMUGGLED, 400),
    # No version: no Host can be required of it, and no host is named (the unknown-host
    # page), then the connection closes.
    ("no-version", b"GET /a\r\n\r\n" + SMUGGLED, 404),
]


@pytest.fixture
def origin() -> Iterator[RawOrigin]:
    with RawOrigin(body_echo_origin) as server:
        yield server


@contextmanager
def both_paths(start: RouterFactory, sessions: sessionmaker[Session],
               origin: RawOrigin) -> Iterator[dict[str, RunningRouter]]:
    """A router with the fast path and one without, on one database, the app cached."""
    add_app(sessions, "game", origin.url)
    with start() as fast, start(proxy_fast_path=False) as asgi:
        routers = {"fast": fast, "asgi": asgi}
        for router in routers.values():
            with connect(router.port) as conn:
                conn.sendall(get(router.host("game"), "/warm", "Connection: close\r\n"))
                assert Answers(conn).next()[1] == b"GET /warm |"
        yield routers


def answer_of(router_port: int, data: bytes) -> tuple[int, bool]:
    """(status, closed after it) of the first answer."""
    with connect(router_port) as conn:
        conn.sendall(data)
        answers = Answers(conn)
        head, _ = answers.next()
        return status_of(head), answers.rest() == b""


@pytest.mark.parametrize(("name", "raw", "status"), CORPUS, ids=[c[0] for c in CORPUS])
def test_an_ambiguous_request_gets_the_same_400_on_both_paths_and_smuggles_nothing(
        name: str, raw: bytes, status: int, start_proxy_router: RouterFactory,
        proxy_sessions: sessionmaker[Session], origin: RawOrigin) -> None:
    answers = {}
    with both_paths(start_proxy_router, proxy_sessions, origin) as routers:
        for path, router in routers.items():
            answers[path] = answer_of(router.port,
                                      raw.replace(b"{host}", router.host("game").encode()))
        time.sleep(0.1)  # a smuggled request would have reached the origin by now
    assert answers["fast"] == answers["asgi"] == (status, True)
    assert not any(b"/smuggled" in head for head in origin.heads)


def test_an_absolute_form_target_is_routed_by_host_the_same_way_on_both_paths(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    """RFC 9112 3.2.2: the target's authority names the host; both paths send it to the
    origin of the Host header's app with the path only, and the same way."""
    bodies = {}
    with both_paths(start_proxy_router, proxy_sessions, origin) as routers:
        for path, router in routers.items():
            with connect(router.port) as conn:
                conn.sendall(f"GET http://{router.host('game')}/abs?q=1 HTTP/1.1\r\n"
                             f"Host: {router.host('game')}\r\nConnection: close\r\n\r\n"
                             .encode())
                bodies[path] = Answers(conn).next()[1]
    assert bodies["fast"] == bodies["asgi"] == b"GET /abs?q=1 |"


def test_a_request_inside_a_body_is_body_and_one_after_it_is_a_second_request(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    """The bytes a Content-Length counts are the body, whatever they look like; the bytes
    after them are the next request, proxied on its own (the fast path holds both)."""
    bodies = {}
    inner = SMUGGLED.replace(b"{host}", b"game.example")
    with both_paths(start_proxy_router, proxy_sessions, origin) as routers:
        fast = routers["fast"].service.fast_path
        assert fast is not None
        taken = fast.taken
        for path, router in routers.items():
            with connect(router.port) as conn:
                conn.sendall(f"POST /a HTTP/1.1\r\nHost: {router.host('game')}\r\n"
                             f"Content-Length: {len(inner)}\r\n\r\n".encode() + inner
                             + get(router.host("game"), "/second", "Connection: close\r\n"))
                answers = Answers(conn)
                bodies[path] = [answers.next()[1], answers.next()[1]]
                assert answers.rest() == b""
        heads = [h.split(b" ", 2)[1] for h in origin.heads]
        assert fast.taken - taken == 2  # both held and proxied by the fast protocol
    assert bodies["fast"] == bodies["asgi"] == [b"POST /a |" + inner, b"GET /second |"]
    assert b"/smuggled" not in heads
    assert heads.count(b"/a") == heads.count(b"/second") == 2


def test_a_body_cut_short_then_closed_reaches_no_origin_from_the_fast_path(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    """Fewer body bytes than the Content-Length, then the client closes: no answer on
    either path, and no whole request at the origin. The fast protocol sends nothing
    before the body is whole; uvicorn's path has streamed the head on by then."""
    seen = {}
    with both_paths(start_proxy_router, proxy_sessions, origin) as routers:
        for path, router in routers.items():
            heads = len(origin.heads)
            with connect(router.port) as conn:
                conn.sendall(f"POST /cut HTTP/1.1\r\nHost: {router.host('game')}\r\n"
                             f"Content-Length: 100\r\n\r\n".encode() + b"x" * 60)
                time.sleep(0.2)
                conn.shutdown(socket.SHUT_WR)
                received = Answers(conn).rest()
            time.sleep(0.2)  # what the router sent on has reached the origin
            seen[path] = (received, [h.split(b" ", 2)[1] for h in origin.heads[heads:]])
    assert seen["fast"] == (b"", [])
    assert seen["asgi"][0] == b""
    assert set(seen["asgi"][1]) <= {b"/cut"}  # at most its head, cut off there
