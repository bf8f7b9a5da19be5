"""A fast-path request with no idle origin connection opens one itself
(router/fast_exchange.py): the same answers as the ASGI path, byte for byte, whether the
connection opens, is refused or does not open in time; and a client that leaves while it
opens leaves nothing behind.

A connect that stays pending is made to a ``FullQueue`` (tests/router/origins.py).
"""

from __future__ import annotations

import socket
import time

from sqlalchemy.orm import Session, sessionmaker

from tests.factories import add_app
from tests.router.origins import RawOrigin, closed_port, full_queue, proxied
from tests.router.test_fast_protocol import served
from tests.router.test_proxy_fast_path import (
    exchange,
    fast_path,
    fixed_origin,
    game,
    one_at_a_time,
    request,
    script,
)
from tests.support.router import RouterFactory, RunningRouter

CONNECT_TIMEOUT = 0.5


def both_paths(router: RunningRouter, data: bytes) -> tuple[bytes, bytes, int, int]:
    """(fast path's bytes, ASGI path's bytes, requests the fast path opened a connection
    for, requests sent on a pooled one) for ``data`` on one new connection each way."""
    fast = fast_path(router)
    opened, untasked = fast.opened, fast.untasked
    fast_bytes = exchange(router, data)
    router.service.fast_path = None
    try:
        slow_bytes = exchange(router, data)
    finally:
        router.service.fast_path = fast
    return fast_bytes, slow_bytes, fast.opened - opened, fast.untasked - untasked


def cache_route(router: RunningRouter) -> None:
    """The app's route cached by the ASGI path, without a request to its origin (the auth
    return page never reaches it)."""
    exchange(router, request(router, "/svc-auth-return", extra="Connection: close\r\n"))


def send_and_see_it_open(router: RunningRouter, client: socket.socket) -> None:
    """Send a GET on ``client`` and wait until the fast path opens an origin connection
    for it."""
    fast = fast_path(router)
    opened = fast.opened
    client.sendall(request(router, "/x"))
    deadline = time.monotonic() + 5
    while fast.opened == opened and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fast.opened == opened + 1, "the request did not open a connection"


def test_with_no_idle_connection_the_fast_path_opens_one_and_answers_as_the_asgi_path(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session]) -> None:
    """Pool size 0: every connection is closed after its answer, so every request opens
    one; the client and the origin see the same bytes as through the ASGI path."""
    with RawOrigin(fixed_origin) as origin, \
            game(start_proxy_router, proxy_sessions, origin.url, proxy_pool_size=0) as router:
        fast = fast_path(router)
        runs = []
        for path in (fast, None):
            router.service.fast_path = path
            counts = fast.taken, fast.opened, fast.untasked, origin.connections
            heads = len(origin.heads)
            received = one_at_a_time(router, script(router))
            runs.append((received, origin.heads[heads:],
                         fast.taken - counts[0], fast.opened - counts[1],
                         fast.untasked - counts[2], origin.connections - counts[3]))
        router.service.fast_path = fast
    (fast_bytes, fast_heads, taken, opened, untasked, fast_conns), \
        (slow_bytes, slow_heads, slow_taken, _, _, slow_conns) = runs
    requests = len(script(router))
    assert taken == opened == requests and untasked == 0 and slow_taken == 0
    assert fast_conns == slow_conns == requests  # a new origin connection for each
    assert fast_bytes == slow_bytes and fast_bytes.count(b"HTTP/1.1 200 OK\r\n") == 4
    assert fast_heads == slow_heads


def test_a_refused_connection_is_answered_as_on_the_asgi_path(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session]) -> None:
    with game(start_proxy_router, proxy_sessions,
              f"http://127.0.0.1:{closed_port()}") as router:
        data = request(router, "/x", extra="Connection: close\r\n")
        fast_bytes, slow_bytes, opened, untasked = both_paths(router, data)
    assert (opened, untasked) == (1, 0)
    assert fast_bytes == slow_bytes
    assert fast_bytes.startswith(b"HTTP/1.1 502 ") and b"could not be reached" in fast_bytes


def test_a_connection_not_opened_in_time_is_answered_as_on_the_asgi_path(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session]) -> None:
    with full_queue() as queue, \
            game(start_proxy_router, proxy_sessions, queue.url,
                 proxy_connect_timeout=CONNECT_TIMEOUT) as router:
        data = request(router, "/x", extra="Connection: close\r\n")
        started = time.monotonic()
        fast_bytes, slow_bytes, opened, untasked = both_paths(router, data)
        elapsed = time.monotonic() - started
    assert (opened, untasked) == (1, 0)
    assert fast_bytes == slow_bytes
    assert fast_bytes.startswith(b"HTTP/1.1 504 ") and b"did not answer in time" in fast_bytes
    assert 2 * CONNECT_TIMEOUT * 0.8 < elapsed < 2 * CONNECT_TIMEOUT + 3


def test_a_client_leaving_while_the_connection_opens_abandons_it(
        start_proxy_router: RouterFactory, proxy_sessions: sessionmaker[Session]) -> None:
    """The connect is cancelled with its client: once the origin has room again, the
    router's next SYN (about a second after the first) would complete the connection and
    send the request; nothing arrives."""
    with full_queue() as queue, \
            proxied(start_proxy_router, proxy_sessions, queue.url,
                    proxy_connect_timeout=30.0) as router:
        fast = fast_path(router)
        cache_route(router)
        with socket.create_connection(("127.0.0.1", router.port), timeout=5) as client:
            send_and_see_it_open(router, client)
            time.sleep(0.2)
        time.sleep(0.2)  # the router sees the client leave
        queue.empty()  # room again: a connect still pending would now complete
        assert queue.accepts_within(2.5) == 0, "the abandoned connect went on"
        assert not fast.proxy.client()._busy


def test_shutdown_while_the_connection_opens_answers_that_request_then_closes(
        proxy_db_url: str, proxy_sessions: sessionmaker[Session]) -> None:
    """uvicorn's graceful shutdown waits for the request in flight, here one whose origin
    connection is still opening: it is sent once the connection opens, and the answer
    reaches the client, with ``connection: close``."""
    with full_queue() as queue:
        add_app(proxy_sessions, "game", queue.url)
        with served(proxy_db_url) as (router, server):
            cache_route(router)
            with socket.create_connection(("127.0.0.1", router.port), timeout=5) as client:
                send_and_see_it_open(router, client)
                server.should_exit = True
                time.sleep(0.3)  # shutting down, the connect still pending
                queue.empty()  # room: the router's next SYN completes the connection
                with queue.accept(3) as upstream:
                    head = b""
                    while not head.endswith(b"\r\n\r\n"):
                        chunk = upstream.recv(4096)
                        assert chunk, "the router closed the origin's connection"
                        head += chunk
                    upstream.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    received = b""
                    while chunk := client.recv(4096):
                        received += chunk
    assert head.startswith(b"GET /x HTTP/1.1\r\n")
    assert received.startswith(b"HTTP/1.1 200 OK\r\n") and received.endswith(b"\r\n\r\nok")
    assert b"\r\nconnection: close\r\n" in received
