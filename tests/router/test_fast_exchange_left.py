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
from router.gating import RuntimeRoute
from router.headers import Headers
from router.proxy import HttpProxy
from router.upstream import make_session
from tests.router.test_upstream_client import OK, answering
from tests.support.router import router_settings


def test_a_connection_opened_as_the_client_left_serves_the_next_request(
        tmp_path: Path) -> None:
    settings = router_settings(f"sqlite:///{tmp_path / 'unused.db'}",
                               allow_private_origins=True)
    answered: list[object] = []  # anything the exchange answers or hands to a task

    def write_whole(status: int, headers: Headers, body: bytes) -> bool:
        answered.append((status, headers, body))
        return True

    with answering(OK) as origin:
        route = RuntimeRoute(
            app_id="zapp_1", slug="game", name="Game", origin=origin.url,
            app_status="active", runtime_status="verified", domain_status="none",
            kill_switch=False, entry_path="/", app_path="/")

        async def main() -> tuple[bool, bool, bytes]:
            session = make_session(settings)
            try:
                proxy = HttpProxy(settings, lambda: session)
                parsed = proxy.origin_for(route)
                assert parsed is not None
                head = [(b"host", parsed.host_bytes)]
                exchange = FastExchange(proxy, route, parsed, "GET", b"/", head, None,
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
                client = proxy.client()
                conn = client.start(parsed, "GET", b"/", head)
                assert conn is not None, "the opened connection was not kept"
                while not conn.complete and conn.error is None:
                    await conn.waiter()
                body = conn.body()
                client.release(conn)
                return pooled, in_window, body
            finally:
                await session.close()

        pooled, in_window, body = uvloop.run(main())
    assert not pooled  # nothing idle: the exchange opened a connection itself
    assert in_window
    assert body == b"ok"
    assert answered == []  # the client had left: nothing answered, no task started
    assert origin.connections == 1
