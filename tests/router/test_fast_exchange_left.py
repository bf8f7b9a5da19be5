"""A fast exchange whose connection opens just as its client leaves
(router/fast_exchange.py): too late to cancel the connect, so the connection is there with
nobody to use it. It goes to the pool for the next request, not closed.

The window is one turn of the event loop: the connect's task is done, its callback (which
would send the request) not yet run. The test steps the loop one callback at a time
(``asyncio.sleep(0)``) until the task is done, and leaves there.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import uvloop

from router.fast_exchange import FastExchange
from router.headers import Headers
from router.proxy import HttpProxy
from router.upstream import make_session
from tests.router.test_upstream_client import OK, answering, fetch
from tests.support.router import router_settings
from tests.unit.test_gating import route


def test_a_connection_opened_as_the_client_left_serves_the_next_request(
        tmp_path: Path) -> None:
    settings = router_settings(f"sqlite:///{tmp_path / 'unused.db'}",
                               allow_private_origins=True)
    answered: list[object] = []  # anything the exchange answers or hands to a task

    def write_whole(status: int, headers: Headers, body: bytes) -> bool:
        answered.append((status, headers, body))
        return True

    with answering(OK) as origin:
        game = route("verified", "none", origin.url)

        async def main() -> tuple[bool, bool, bytes]:
            session = make_session(settings)
            try:
                proxy = HttpProxy(settings, lambda: session)
                parsed = proxy.origin_for(game)
                assert parsed is not None
                head = [(b"host", parsed.host_bytes)]
                exchange = FastExchange(proxy, game, parsed, "GET", b"/", head, None,
                                        write_whole=write_whole,
                                        start_task=answered.append)
                pooled = exchange.start()
                opening = exchange._opening
                assert opening is not None
                while not opening.done():  # noqa: ASYNC110 (one loop step at a time)
                    await asyncio.sleep(0)
                in_window = exchange._opening is opening  # its callback has not run
                exchange.client_left()
                await asyncio.sleep(0)
                _, _, body = await fetch(proxy.client(), origin.url)
                return pooled, in_window, body
            finally:
                await session.close()

        pooled, in_window, body = uvloop.run(main())
    assert not pooled  # nothing idle: the exchange opened a connection itself
    assert in_window
    assert body == b"ok"
    assert answered == []  # the client had left: nothing answered, no task started
    assert origin.connections == 1  # the request went on the kept connection


def test_a_client_leaving_a_slow_answer_settles_the_exchange_at_once(tmp_path: Path) -> None:
    """The origin has the request and has not answered; the client leaves. The exchange
    settles as the ASGI path would (the connection closed and out of the busy set,
    nothing answered) at once, with no request cycle and task for nobody."""
    settings = router_settings(f"sqlite:///{tmp_path / 'unused.db'}",
                               allow_private_origins=True)
    handed: list[object] = []  # anything the exchange answers or hands to a task

    def write_whole(status: int, headers: Headers, body: bytes) -> bool:
        handed.append((status, headers, body))
        return True

    with answering() as origin:  # takes the request, never answers
        game = route("verified", "none", origin.url)

        async def main() -> tuple[bool, bool, bool, bool]:
            session = make_session(settings)
            try:
                proxy = HttpProxy(settings, lambda: session)
                parsed = proxy.origin_for(game)
                assert parsed is not None
                client = proxy.client()
                client.keep(await client.opening(parsed))  # an idle pooled connection
                exchange = FastExchange(proxy, game, parsed, "GET", b"/",
                                        [(b"host", parsed.host_bytes)], None,
                                        write_whole=write_whole, start_task=handed.append)
                pooled = exchange.start()
                conn = exchange._conn
                assert conn is not None
                was_busy = conn in client._busy
                exchange.client_left()
                return pooled, was_busy, conn in client._busy, conn.closed
            finally:
                await session.close()

        pooled, was_busy, still_busy, closed = uvloop.run(main())
    assert pooled and was_busy
    assert not still_busy and closed
    assert handed == []
