"""A fast exchange whose client leaves (router/fast_exchange.py), driven on its own against a
real origin on loopback, with nothing behind it but what it answers or hands to a task.

- Just as its connection opens: too late to cancel the connect, so the connection is there
  with nobody to use it. It goes to the pool for the next request, not closed. The window
  is one turn of the event loop: the connect's task is done, its callback (which would
  send the request) not yet run. The test steps the loop one callback at a time
  (``asyncio.sleep(0)``) until the task is done, and leaves there.
- While the origin holds its request: settled at once, with no task.
- While its complete answer waits for its app's turn (router/turns.py): the connection,
  whose answer was read whole, goes to the pool, and nothing is written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest
import uvloop

from router.fast_exchange import FastExchange
from router.gating import RuntimeRoute
from router.headers import Headers
from router.origin import Origin
from router.proxy import HttpProxy
from router.turns import Turns
from router.upstream import make_session
from tests.router.test_upstream_client import OK, answering, fetch
from tests.support.router import router_settings
from tests.unit.test_gating import route

T = TypeVar("T")


class Exchanges:
    """Fast exchanges of GET / to one origin through a real proxy, recording everything
    they answer (``write_whole``) or hand to a task (``start_task``) in ``handed``."""

    def __init__(self, proxy: HttpProxy, game: RuntimeRoute, origin: Origin) -> None:
        self.proxy = proxy
        self.origin = origin
        self._game = game
        self.handed: list[object] = []
        self.turns = Turns(asyncio.get_running_loop(), share=1)

    def new(self) -> FastExchange:
        return FastExchange(self.proxy, self._game, self.origin, "GET", b"/",
                            [(b"host", self.origin.host_bytes)], None,
                            write_whole=self._write_whole, start_task=self.handed.append,
                            turns=self.turns)

    def _write_whole(self, status: int, headers: Headers, body: bytes) -> bool:
        self.handed.append((status, headers, body))
        return True


def run_with(tmp_path: Path, origin_url: str,
             test: Callable[[Exchanges], Coroutine[Any, Any, T]]) -> T:
    settings = router_settings(f"sqlite:///{tmp_path / 'unused.db'}",
                               allow_private_origins=True)
    game = route("verified", "none", origin_url)

    async def main() -> T:
        session = make_session(settings)
        proxy = HttpProxy(settings, lambda: session)
        try:
            parsed = proxy.origin_for(game)
            assert parsed is not None
            return await test(Exchanges(proxy, game, parsed))
        finally:
            # Its connections closed here, as the service's shutdown closes them, not left
            # open when the loop ends, with the origin's side waiting on them.
            await proxy.client().close()
            await session.close()

    return uvloop.run(main())


def test_a_connection_opened_as_the_client_left_serves_the_next_request(
        tmp_path: Path) -> None:
    with answering(OK) as origin:
        async def test(made: Exchanges) -> tuple[bool, bool, bytes, list[object]]:
            exchange = made.new()
            pooled = exchange.start()
            opening = exchange._opening
            assert opening is not None
            while not opening.done():  # noqa: ASYNC110 (one loop step at a time)
                await asyncio.sleep(0)
            in_window = exchange._opening is opening  # its callback has not run
            exchange.client_left()
            await asyncio.sleep(0)
            _, _, body = await fetch(made.proxy.client(), origin.url)
            return pooled, in_window, body, made.handed

        pooled, in_window, body, handed = run_with(tmp_path, origin.url, test)
    assert not pooled  # nothing idle: the exchange opened a connection itself
    assert in_window
    assert body == b"ok"
    assert handed == []  # the client had left: nothing answered, no task started
    assert origin.connections == 1  # the request went on the kept connection


def test_a_client_leaving_a_slow_answer_settles_the_exchange_at_once(tmp_path: Path) -> None:
    """The origin has the request and has not answered; the client leaves. The exchange
    settles as the ASGI path would (the connection closed and out of the busy set,
    nothing answered) at once, with no request cycle and task for nobody."""
    with answering() as origin:  # takes the request, never answers
        async def test(made: Exchanges) -> tuple[bool, bool, bool, bool, list[object]]:
            client = made.proxy.client()
            client.keep(await client.opening(made.origin))  # an idle pooled connection
            exchange = made.new()
            pooled = exchange.start()
            conn = exchange._conn
            assert conn is not None
            was_busy = conn in client._busy
            exchange.client_left()
            return pooled, was_busy, conn in client._busy, conn.closed, made.handed

        pooled, was_busy, still_busy, closed, handed = run_with(tmp_path, origin.url, test)
    assert pooled and was_busy
    assert not still_busy and closed
    assert handed == []


async def answer_waiting_its_turn(made: Exchanges, leave: bool) -> tuple[bool, bool, bool]:
    """An exchange whose complete answer must wait for its app's turn: work of the app
    already waits, a thousand pieces that put themselves back at the end of its queue
    (one runs per turn), so the answer waits about a thousand turns behind them. The
    client leaves then, or not; then the filler stops and the queue drains. (whether the
    answer waited, whether its connection is in the pool, whether it is closed)"""
    client, turns, slug = made.proxy.client(), made.turns, made._game.slug
    client.keep(await client.opening(made.origin))
    filling = True

    def filler() -> None:
        if filling:
            turns.defer(slug, filler)

    for _ in range(1000):
        turns.defer(slug, filler)
    exchange = made.new()
    assert exchange.start(), "sent on the pooled connection"
    conn = exchange._conn
    assert conn is not None
    while not conn.complete:  # noqa: ASYNC110 (one loop turn at a time)
        await asyncio.sleep(0)
    waited = made.handed == [] and conn.on_step is None and conn in client._busy
    if leave:
        exchange.client_left()
    filling = False
    while turns._queued:  # noqa: ASYNC110
        await asyncio.sleep(0)
    return waited, conn in client._idle.get(conn.key, []), conn.closed


@pytest.mark.parametrize("leave", [False, True], ids=["stays", "leaves"])
def test_an_answer_waiting_its_turn_is_written_or_its_connection_pooled(
        tmp_path: Path, leave: bool) -> None:
    """The answer was read whole, so its connection serves the next request either way.
    A client still there gets it when the turn comes; one that left gets nothing, and no
    task starts for it."""
    with answering(OK) as origin:
        async def test(made: Exchanges) -> tuple[tuple[bool, bool, bool], list[object]]:
            return await answer_waiting_its_turn(made, leave=leave), made.handed

        (waited, pooled, closed), handed = run_with(tmp_path, origin.url, test)
    assert waited
    assert pooled and not closed
    written = [(status, body) for status, _, body
               in cast(list[tuple[int, Headers, bytes]], handed)]
    assert written == ([] if leave else [(200, b"ok")])
