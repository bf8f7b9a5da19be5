"""Answering a client that may still be sending, then closing (nginx's lingering close).

A refused request head (``router/head_limits.py``) is answered before the client has
finished sending it. Closing at once with its bytes unread makes the kernel reset the
connection, and a reset discards the answer from the client's receive buffer: the client
sees "connection reset" instead of the 431. So our side of the connection is ended after
the answer and what still arrives is read and dropped, holding nothing, until the client
closes or ``LINGER_SECONDS`` pass.
"""

from __future__ import annotations

import asyncio

LINGER_SECONDS = 5.0


class _Discard(asyncio.Protocol):
    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop,
                 seconds: float) -> None:
        self._timer = loop.call_later(seconds, transport.close)

    def data_received(self, data: bytes) -> None:
        pass

    def eof_received(self) -> bool | None:
        return None  # the client is done: close

    def connection_lost(self, exc: Exception | None) -> None:
        self._timer.cancel()


def answer_and_linger(transport: asyncio.Transport, loop: asyncio.AbstractEventLoop,
                      answer: bytes, seconds: float = LINGER_SECONDS) -> None:
    """Write ``answer``, end our side, and drop what the client still sends. The
    connection's protocol is replaced: nothing more of it reaches the caller."""
    transport.write(answer)
    if not transport.can_write_eof():  # TLS: no half-close; the answer goes out first
        transport.close()
        return
    transport.write_eof()
    transport.set_protocol(_Discard(transport, loop, seconds))
    transport.resume_reading()
