"""A fast-path request carried by the origin connection's callbacks, without a task.

For the common answer the whole exchange happens inside two callbacks: the client's
request is whole (``router/fast_protocol.py`` starts it, head and any body in one write,
on an idle pooled connection) and the origin's answer arrives, head and small body in one
segment (the connection calls :meth:`FastExchange.step`, which writes the answer). A
coroutine in a task costs a task, a future and two trips round the event loop per request
for the same work (bench/proxy_bench.py, docs/decisions.md).

With no idle connection to the origin, the exchange opens one (a task for the connect
alone, as :meth:`router.upstream_client.UpstreamClient.request` opens it) and sends once it
is there; failing to open it is answered as the ASGI path answers it. Every request after
a burst of new clients comes here, and a request cycle each made those requests cost
almost four times a pooled one (bench/proxy_cases.py, case 4's start).

Only that plain case is handled here. Anything else -- an error, a timeout, a client that
left, an answer to stream or too large, a write ``send`` must make -- continues in an
ordinary task through :meth:`router.proxy.HttpProxy.exchange`, on the connection already
begun, so retries, gateway pages and streaming stay exactly those of the ASGI path.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from typing import cast

from uvicorn._types import ASGI3Application

from router.gating import RuntimeRoute
from router.headers import Headers, ResponsePlan, plan_response
from router.origin import Origin
from router.origin_connection import OriginConnection
from router.origin_errors import ClientGone
from router.proxy import HttpProxy, WholeWriter, bodyless
from router.turns import Turns
from router.upstream_client import UpstreamClient

log = logging.getLogger(__name__)

StartTask = Callable[[ASGI3Application], None]


class FastExchange:
    __slots__ = ("_admitted", "_body", "_client", "_conn", "_headers", "_left", "_method",
                 "_opening", "_origin", "_plan", "_proxy", "_route", "_start_task", "_target",
                 "_turns", "_write_whole")

    def __init__(self, proxy: HttpProxy, route: RuntimeRoute, origin: Origin, method: str,
                 target: bytes, headers: Headers, body: bytes | None,
                 write_whole: WholeWriter, start_task: StartTask, turns: Turns) -> None:
        self._proxy = proxy
        self._body = body  # the whole request body, or None for a bodyless request
        self._route = route
        self._origin = origin
        self._method = method
        self._target = target
        self._headers = headers
        self._write_whole = write_whole
        self._start_task = start_task
        self._conn: OriginConnection | None = None
        self._client: UpstreamClient  # set by start(), which may fail (the caller catches)
        self._plan: ResponsePlan | None = None
        self._opening: asyncio.Task[OriginConnection] | None = None
        self._left = False
        self._turns = turns
        self._admitted = False

    def start(self) -> bool:
        """Send the request (and its body): True, at once on an idle pooled connection;
        False, once the new connection it opens is there (or, failing that, the ASGI
        path's answer to the failure)."""
        client = self._client = self._proxy.client()
        # No client_gone: the protocol tells client_left() itself, with no task to watch.
        conn = client.start(
            self._origin, self._method, self._target, self._headers, self._body or b"")
        if conn is None:
            opening = self._opening = client.opening(self._origin)
            opening.add_done_callback(self._opened)
            return False
        self._conn = conn
        conn.on_step = self.step
        return True

    def _opened(self, opening: asyncio.Task[OriginConnection]) -> None:
        self._opening = None
        if opening.cancelled():
            return  # client_left() cancelled it: nobody is left to answer
        error = opening.exception()
        if self._left:  # it opened just as the client left (too late to cancel)
            if error is None:
                self._client.keep(opening.result())
            return
        if error is not None:
            self._start_task(self.task(error))
            return
        conn = self._conn = opening.result()
        self._client.begin_on(conn, self._method, self._target, self._headers,
                              self._body or b"")
        conn.on_step = self.step

    def task(self, failed: BaseException | None = None) -> ASGI3Application:
        """The rest of the exchange as the request cycle's ASGI application; ``failed``:
        opening its connection failed so."""
        return cast(ASGI3Application, partial(
            self._proxy.exchange, route=self._route, origin=self._origin,
            headers=self._headers, target=self._target, body=self._body,
            write_whole=self._write_whole, started=self._conn, failed=failed))

    def client_left(self) -> None:
        """The client's connection is lost: cut the origin's exchange now, while it is still
        this object's (the task it became, if any, watches the client its own way). Without
        it, a request the origin is slow to answer would need a watching task each, and
        under load that is most requests (bench/proxy_cases.py, case 4). Settled here as
        the ASGI path settles it (:meth:`UpstreamClient.request` releases the connection,
        :meth:`HttpProxy.exchange` answers nobody), with no request cycle and task for it:
        when many clients leave at once (a load balancer's, a crowd's), each cost a task,
        and left some forty objects in reference cycles for the collector."""
        self._left = True
        opening = self._opening
        if opening is not None:
            opening.cancel()  # the connection being opened is closed, or kept in _opened
            return
        conn = self._conn
        if conn is not None and conn.on_step is not None and not conn.complete:
            conn.on_step = None
            conn.abort(ClientGone("the client went away"))
            self._client.release(conn)  # out of the busy set; closed, never pooled

    def step(self) -> None:
        """The connection made progress (head, body, end, or an error)."""
        conn = self._conn
        assert conn is not None
        if conn.error is None:
            if not conn.head_done:
                return
            if conn.complete and not self._admitted:
                # Writing the answer is the app's work: in its share of a turn
                # (router/turns.py). Once: a deferred step comes back here admitted.
                self._admitted = True
                if not self._turns.admit(self._route.slug):
                    conn.on_step = None  # a complete answer: nothing more will step it
                    self._turns.defer(self._route.slug, self._turn_came)
                    return
            try:
                if self._finish(conn):
                    return
            except Exception:  # the task's relay meets it again, and uvicorn answers 500
                log.exception("fast exchange of %s", self._route.slug)
        conn.on_step = None
        self._start_task(self.task())

    def _turn_came(self) -> None:
        """The complete answer waited for its app's turn; its client may have left since
        (client_left leaves a complete answer alone): the connection is pooled."""
        conn = self._conn
        assert conn is not None
        if self._left:
            self._client.release(conn)
            return
        self.step()  # admitted now; it writes the answer, or hands it to a task

    def _finish(self, conn: OriginConnection) -> bool:
        """True while waiting for the body or once the answer is written; False: the task
        takes over (the answer is not a small whole one, or ``send`` must write it)."""
        plan = self._plan
        if plan is None:
            plan = self._plan = plan_response(conn.headers)
            if not self._proxy.relays_whole(self._method, conn.status, plan[1]):
                return False
        if not conn.complete:
            return True  # the rest of a small body is on its way
        conn.on_step = None
        empty = bodyless(self._method, conn.status)
        if not self._write_whole(conn.status, plan[0], b"" if empty else conn.body()):
            return False
        self._client.release(conn)
        return True
