"""The origins bench/proxy_cases.py puts behind both proxies, each run as its own process:

    python bench/case_origins.py slow --port P [--delay 0.2] [--arrivals FILE]
    python bench/case_origins.py ws --port P

- ``slow``: HTTP/1.1 keep-alive on uvloop, every answer ``delay`` s after its request
  arrived (a timer, not a blocked loop: 2,000 requests wait at once). ``/digest`` answers
  the request body's length and SHA-256 (to check a proxy relays a body byte for byte),
  every other path the 1,024-byte body of the other cases. With ``--arrivals``, the
  ``time.monotonic()`` at which each request arrived (the clock every process shares) is
  written to FILE, one per line, when the origin gets SIGTERM (bench/case_profile.py
  ``arrivals``).
- ``ws``: a WebSocket echo (the ``websockets`` library on uvloop; no compression, no
  pings, so each message costs the same through either proxy).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import signal
import time
from pathlib import Path
from typing import cast

import uvloop

BODY = ("svc-proxy-bench-" * 64).encode()  # as bench/proxy_bench.py's
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n"


def digest_answer(body: bytes) -> bytes:
    return f"{len(body)} {hashlib.sha256(body).hexdigest()}".encode()


def split_request(buffer: bytes) -> tuple[bytes, bytes, bytes] | None:
    """(head, body, rest) of the first whole request in ``buffer`` (Content-Length bodies
    only: the bench sends no chunked ones), or None while it is incomplete."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = buffer[:end]
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    start = end + 4
    if len(buffer) < start + length:
        return None
    return head, buffer[start:start + length], buffer[start + length:]


class SlowHttp(asyncio.Protocol):
    def __init__(self, delay: float, arrivals: list[float] | None = None) -> None:
        self._delay = delay
        self._arrivals = arrivals
        self._buffer = b""
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while (request := split_request(self._buffer)) is not None:
            head, body, self._buffer = request
            if self._arrivals is not None:
                self._arrivals.append(time.monotonic())
            path = head.split(b" ", 2)[1]
            payload = digest_answer(body) if path == b"/digest" else BODY
            close = b"\r\nconnection: close" in head.lower()
            # Same delay for every request, so pipelined answers keep their order.
            self._loop.call_later(self._delay, self._answer, HEAD % len(payload) + payload,
                                  close)

    def _answer(self, data: bytes, close: bool) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        transport.write(data)
        if close:
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None


async def serve_slow(port: int, delay: float, arrivals: list[float] | None = None) -> None:
    """Until killed; with ``arrivals`` (logged into it), until SIGTERM."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: SlowHttp(delay, arrivals), "127.0.0.1", port,
                                      backlog=4096)
    if arrivals is None:
        async with server:
            await server.serve_forever()
        return
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    server.close()


async def serve_ws(port: int) -> None:
    from websockets.asyncio.server import ServerConnection, serve

    async def echo(ws: ServerConnection) -> None:
        async for message in ws:
            await ws.send(message)

    async with serve(echo, "127.0.0.1", port, compression=None, ping_interval=None,
                     max_queue=4, backlog=4096) as server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("slow", "ws"))
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--arrivals", type=Path, help="slow: log request arrival times here")
    options = parser.parse_args()
    arrivals: list[float] | None = None if options.arrivals is None else []
    coro = serve_slow(options.port, options.delay, arrivals) \
        if options.kind == "slow" else serve_ws(options.port)
    uvloop.run(coro)
    if arrivals is not None:
        options.arrivals.write_text("".join(f"{t:.6f}\n" for t in arrivals))


if __name__ == "__main__":
    main()
