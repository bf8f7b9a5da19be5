"""An app's requests beyond its share of a turn (router/turns.py), through the real router.

The router's event loop is held busy (a callback that sleeps in it) while eight clients
of one app send a request each, so that the loop finds all eight in one turn. With a
share of one, seven of them, and then their answers, wait for later turns. They must be
answered exactly as the ASGI path answers them (byte for byte, each to its own client),
and each reach the origin exactly once.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest
from sqlalchemy.orm import Session, sessionmaker

from router.turns import Turns
from tests.factories import add_app
from tests.router.origins import RawOrigin
from tests.router.test_fast_protocol import Answers, get
from tests.router.test_proxy_fast_path import exchange, fast_path, fixed_origin, game
from tests.support.router import RouterFactory, RunningRouter
from tests.support.servers import hold_loop

CLIENTS = 8
STALL = 0.5  # seconds the router's loop is held while the clients send


@pytest.fixture
def origin() -> Iterator[RawOrigin]:
    with RawOrigin(fixed_origin) as server:
        yield server


def read_answer(conn: socket.socket) -> bytes:
    """One Content-Length framed answer, head and body."""
    head, body = Answers(conn).next()
    return head + body


def stall(turns: Turns, seconds: float = STALL) -> None:
    """Hold the router's event loop for ``seconds``: clients' requests sent meanwhile are
    found in one turn."""
    hold_loop(turns._loop, seconds)


def burst(router: RunningRouter, turns: Turns) -> list[bytes]:
    """CLIENTS keep-alive connections, each with a first request answered; then, while
    the loop is held, a second request on each; every connection's answers."""
    with ExitStack() as stack:
        conns = [stack.enter_context(socket.create_connection(("127.0.0.1", router.port),
                                                              timeout=10))
                 for _ in range(CLIENTS)]
        answers = []
        for number, conn in enumerate(conns):
            conn.sendall(get(router.host("game"), f"/first{number}"))
            answers.append(read_answer(conn))
        stall(turns)
        for number, conn in enumerate(conns):
            conn.sendall(get(router.host("game"), f"/second{number}"))
        for number, conn in enumerate(conns):
            answers[number] += read_answer(conn)
    return answers


@contextmanager
def shared_by_one(start: RouterFactory, sessions: sessionmaker[Session],
                  url: str) -> Iterator[RunningRouter]:
    with game(start, sessions, url) as router:
        turns = fast_path(router).turns
        assert turns is not None
        turns.share = 1
        yield router


def test_requests_past_an_apps_share_wait_their_turn_and_are_answered_as_on_the_asgi_path(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    with shared_by_one(start_proxy_router, proxy_sessions, origin.url) as router:
        fast = fast_path(router)
        turns = fast.turns
        assert turns is not None
        taken, deferred, heads = fast.taken, turns.deferred, len(origin.heads)
        with_turns = burst(router, turns)
        waited = turns.deferred - deferred
        assert fast.taken - taken == 2 * CLIENTS, "every request took the fast path"
        fast_heads = origin.heads[heads:]
        router.service.fast_path = None  # new connections: uvicorn's protocol, ASGI
        try:
            heads = len(origin.heads)
            asgi = burst(router, turns)
            asgi_heads = origin.heads[heads:]
        finally:
            router.service.fast_path = fast
        assert exchange(router, get(router.host("game"), "/after", "Connection: close\r\n"))
    # Seven second requests, and then answers, found the app's share of their turn spent.
    assert waited >= CLIENTS - 1
    assert with_turns == asgi
    for number, answers in enumerate(with_turns):
        assert answers.count(b"HTTP/1.1 200 OK\r\n") == 2
        assert f"GET /second{number} HTTP/1.1".encode() in answers
    # Each request reached the origin once, whatever order the turns sent them in.
    assert len(fast_heads) == 2 * CLIENTS
    assert sorted(fast_heads) == sorted(asgi_heads)


def test_another_apps_request_is_sent_before_the_requests_waiting_for_their_turns(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    """Eight requests of one app and one of another, all in the same turn: the other
    app's share is its own, so its request goes to the origin in that turn, ahead of the
    seven that wait for the turns after it (the origin sees requests in the order the
    router writes them: each on its own connection, over loopback)."""
    with shared_by_one(start_proxy_router, proxy_sessions, origin.url) as router:
        add_app(proxy_sessions, "arcade", origin.url)
        assert exchange(router, get(router.host("arcade"), "/warm",
                                    "Connection: close\r\n"))
        turns = fast_path(router).turns
        assert turns is not None
        with ExitStack() as stack:
            conns = [stack.enter_context(socket.create_connection(
                ("127.0.0.1", router.port), timeout=10)) for _ in range(CLIENTS + 1)]
            slugs = ["game"] * CLIENTS + ["arcade"]
            for conn, slug in zip(conns, slugs, strict=True):
                conn.sendall(get(router.host(slug), "/first"))
                read_answer(conn)
            heads = len(origin.heads)
            stall(turns)
            for number, (conn, slug) in enumerate(zip(conns, slugs, strict=True)):
                conn.sendall(get(router.host(slug), f"/{slug}{number}"))
            answers = [read_answer(conn) for conn in conns]
        seen = [head.split(b" ")[1] for head in origin.heads[heads:]]
    assert all(answer.startswith(b"HTTP/1.1 200 OK\r\n") for answer in answers)
    assert sorted(seen) == sorted(f"/{slug}{n}".encode() for n, slug in enumerate(slugs))
    # The first of the game's and the arcade's went in the first turn, in either order.
    assert seen.index(f"/arcade{CLIENTS}".encode()) <= 1


def test_connections_the_service_answered_have_a_share_apart_from_new_ones(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin) -> None:
    """A keep-alive client of the service's own hosts (an API client) does not wait behind
    a crowd of new connections: its requests count against the service's share, theirs
    against the share of connections with no app yet. Two new connections and one known
    one in one turn, a share of one: only the second new one waits."""
    with shared_by_one(start_proxy_router, proxy_sessions, origin.url) as router:
        turns = fast_path(router).turns
        assert turns is not None
        api = f"GET /statusz HTTP/1.1\r\nHost: api.localhost:{router.port}\r\n\r\n".encode()
        with ExitStack() as stack:
            known, *new = [stack.enter_context(socket.create_connection(
                ("127.0.0.1", router.port), timeout=10)) for _ in range(3)]
            known.sendall(api)
            read_answer(known)
            deferred = turns.deferred
            stall(turns)
            for conn in (known, *new):
                conn.sendall(api)
            answers = [read_answer(conn) for conn in (known, *new)]
        waited = turns.deferred - deferred
    assert all(answer.startswith(b"HTTP/1.1 200 OK\r\n") for answer in answers)
    assert waited == 1


def test_clients_that_leave_while_their_request_waits_its_turn_cost_nothing_after(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session],
        origin: RawOrigin, caplog: pytest.LogCaptureFixture) -> None:
    """Requests whose clients close at once, found in the same turn as their bytes: those
    that wait for a later turn find their connection gone and are dropped there (no
    exchange, no origin connection, no error); a client that stays is answered."""
    with shared_by_one(start_proxy_router, proxy_sessions, origin.url) as router:
        fast = fast_path(router)
        turns = fast.turns
        assert turns is not None
        with ExitStack() as stack:
            conns = [stack.enter_context(socket.create_connection(
                ("127.0.0.1", router.port), timeout=10)) for _ in range(CLIENTS)]
            for conn in conns:
                conn.sendall(get(router.host("game"), "/first"))
                read_answer(conn)
            deferred, heads = turns.deferred, len(origin.heads)
            stall(turns)
            *leaving, staying = conns
            for conn in leaving:
                conn.sendall(get(router.host("game"), "/gone"))
                conn.close()
            staying.sendall(get(router.host("game"), "/stays"))
            answer = read_answer(staying)
        deadline = time.monotonic() + 5
        while fast.proxy.client()._busy and time.monotonic() < deadline:
            time.sleep(0.01)
        busy = len(fast.proxy.client()._busy)
        waited = turns.deferred - deferred
        sent = [head.split(b" ")[1] for head in origin.heads[heads:]]
    assert b"GET /stays HTTP/1.1" in answer
    assert waited >= CLIENTS - 1
    # At most the one admitted in the first turn reached the origin before its client's
    # close was read; none of those that waited did.
    assert sent.count(b"/gone") <= 1 and b"/stays" in sent
    assert busy == 0
    assert "fast path" not in caplog.text
