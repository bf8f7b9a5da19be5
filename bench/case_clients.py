"""The load generators of bench/proxy_cases.py that wrk is not, each run as its own process
on uvloop, printing one JSON line of figures:

    python bench/case_clients.py paced --port P --host H --connections C --rate R
                                       --duration S [--hold]
    python bench/case_clients.py ws --port P --host H --connections C --duration S

- ``paced``: opens ``C`` keep-alive connections, sends one GET on each (a warm-up, also
  checking status 200 and the 1,024-byte body), then sends ``R`` requests a second for
  ``S`` seconds, spread round-robin over the connections (a connection still busy is
  skipped for the next free one). Latency is counted from when a request was due, not
  when it went out, so a slow server cannot hide its delay by slowing the sender (wrk2's
  correction). With ``--hold`` it prints ``primed`` after the warm-up and waits for a line
  on stdin before the timed load: the caller measures memory with every connection open.
- ``ws``: ``C`` WebSocket connections, each sending a 100-byte binary message, waiting for
  its echo (checked byte for byte: each connection's message is its own) and sending the
  next, for a 1 s warm-up then ``S`` seconds; messages/s counts echoes in those ``S`` s.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import itertools
import json
import sys
import time
from typing import cast

import uvloop
from case_figures import percentile  # bench/ is on sys.path when run as a script
from case_targets import raise_open_files

BODY_LENGTH = 1024
WS_KEY = base64.b64encode(b"proxy-cases-key!").decode()


def accept_for(key: str) -> str:
    """The Sec-WebSocket-Accept a server answers ``key`` with (RFC 6455 4.2.2)."""
    digest = hashlib.sha1(  # noqa: S324 (the handshake's hash, not a secret)
        (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()
    return base64.b64encode(digest).decode()


WS_ACCEPT = accept_for(WS_KEY)
MASK = b"\x1f\x2e\x3d\x4c"


def response_length(buffer: bytes) -> tuple[int, int] | None:
    """(status, whole length) of the HTTP answer at the start of ``buffer`` once its head is
    in, or None before (Content-Length answers: what every origin of the bench sends)."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = buffer[:end].split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return status, end + 4 + length


class PacedConnection(asyncio.Protocol):
    def __init__(self, request: bytes, stats: PacedStats) -> None:
        self.request = request
        self.stats = stats
        self.transport: asyncio.Transport | None = None
        self.due = 0.0  # when the request in flight was due; 0 while idle
        self.done: asyncio.Future[None] | None = None
        self.buffer = b""
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass

    def send(self, due: float) -> None:
        assert self.transport is not None
        self.due = due
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        framed = response_length(self.buffer)
        if framed is None or len(self.buffer) < framed[1]:
            return
        status, length = framed
        body = len(self.buffer) - self.buffer.find(b"\r\n\r\n") - 4
        ok = status == 200 and body == BODY_LENGTH and length == len(self.buffer)
        self.buffer = b""
        self.stats.answered(time.monotonic() - self.due, ok)
        self.due = 0.0
        if self.done is not None and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.due:
            self.stats.errors += 1
            self.due = 0.0
        if self.done is not None and not self.done.done():
            self.done.set_result(None)


class PacedStats:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors = 0
        self.recording = False

    def answered(self, seconds: float, ok: bool) -> None:
        if not ok:
            self.errors += 1
        elif self.recording:
            self.latencies.append(seconds)


async def open_all(port: int, count: int, make: type[asyncio.Protocol] | object,
                   parallel: int = 200) -> list[asyncio.BaseProtocol]:
    """``count`` connections, ``parallel`` at a time (a burst of 10,000 would overflow
    listen backlogs, and a dropped SYN costs a 1 s retransmit)."""
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(parallel)

    async def one() -> asyncio.BaseProtocol:
        async with gate:
            _, protocol = await loop.create_connection(make, "127.0.0.1", port)  # type: ignore[arg-type]
            return protocol

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def prime(conns: list[PacedConnection], parallel: int = 200) -> None:
    """One request on every connection, ``parallel`` at a time."""
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(parallel)

    async def one(conn: PacedConnection) -> None:
        async with gate:
            conn.done = loop.create_future()
            conn.send(time.monotonic())
            await asyncio.wait_for(conn.done, 30)

    await asyncio.gather(*(one(c) for c in conns))


async def paced(port: int, host: str, path: str, connections: int, rate: float,
                duration: float, hold: bool) -> dict[str, float]:
    stats = PacedStats()
    request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    conns = [c for c in await open_all(port, connections, lambda: PacedConnection(
        request, stats)) if isinstance(c, PacedConnection)]
    await prime(conns)
    if hold:
        print("primed", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    stats.recording = True
    total, skipped, sent = int(rate * duration), 0, 0
    start = time.monotonic()
    cursor = 0
    while sent < total:
        now = time.monotonic()
        due_now = min(total, int((now - start) * rate) + 1)
        while sent < due_now:
            due = start + sent / rate
            for _ in range(len(conns)):  # the next idle, open connection
                conn = conns[cursor]
                cursor = (cursor + 1) % len(conns)
                if not conn.due and not conn.closed:
                    conn.send(due)
                    break
                skipped += 1
            else:
                stats.errors += 1  # nowhere to send it
            sent += 1
        await asyncio.sleep(0.002)
    for _ in range(1000):  # up to 10 s for the answers still due
        if not any(c.due for c in conns):
            break
        await asyncio.sleep(0.01)
    elapsed = time.monotonic() - start
    late = sum(1 for c in conns if c.due)
    closed = sum(1 for c in conns if c.closed)
    for conn in conns:
        if conn.transport is not None:
            conn.transport.close()
    lat = sorted(stats.latencies)
    return {"sent": sent, "answered": len(lat), "errors": stats.errors + late,
            "closed_by_server": closed, "skipped_busy": skipped,
            "rate": len(lat) / elapsed,
            "p50_ms": 1e3 * percentile(lat, 50), "p99_ms": 1e3 * percentile(lat, 99),
            "max_ms": 1e3 * (lat[-1] if lat else 0.0)}


def ws_frame(payload: bytes) -> bytes:
    """A masked binary frame (RFC 6455 5.2) of up to 125 bytes, as a client sends it."""
    assert len(payload) <= 125
    masked = bytes(b ^ MASK[i % 4] for i, b in enumerate(payload))
    return bytes([0x82, 0x80 | len(payload)]) + MASK + masked


class WsEcho(asyncio.Protocol):
    """Handshake, then send one message, await its echo, repeat."""

    def __init__(self, host: str, payload: bytes, counter: list[int]) -> None:
        self.handshake = (f"GET / HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                          f"Connection: Upgrade\r\nSec-WebSocket-Key: {WS_KEY}\r\n"
                          "Sec-WebSocket-Version: 13\r\n\r\n").encode()
        self.frame = ws_frame(payload)
        self.echo = bytes([0x82, len(payload)]) + payload  # unmasked, from the server
        self.counter = counter
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.upgraded = False
        self.error = ""
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        self.transport.write(self.handshake)

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.buffer += data
        if not self.upgraded:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head, self.buffer = self.buffer[:end], self.buffer[end + 4:]
            if not head.startswith(b"HTTP/1.1 101") or WS_ACCEPT.encode() not in head:
                self.fail(f"handshake refused: {head[:200]!r}")
                return
            self.upgraded = True
            self.ready.set_result(None)
        while len(self.buffer) >= 2:
            opcode, length = self.buffer[0] & 0x0F, self.buffer[1] & 0x7F
            if len(self.buffer) < 2 + length:  # the bench's frames are all under 126 bytes
                return
            frame, self.buffer = self.buffer[:2 + length], self.buffer[2 + length:]
            if opcode == 0x9:  # ping: answer, as any client must
                self.transport.write(bytes([0x8A, 0x80 | length]) + MASK + bytes(
                    b ^ MASK[i % 4] for i, b in enumerate(frame[2:])))
            elif frame != self.echo:
                self.fail(f"not the echo: {frame[:40]!r}")
                return
            else:
                self.counter[0] += 1
                self.transport.write(self.frame)

    def start(self) -> None:
        assert self.transport is not None
        self.transport.write(self.frame)

    def fail(self, why: str) -> None:
        self.error = why
        if not self.ready.done():
            self.ready.set_result(None)
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.error and self.transport is not None and not self.transport.is_closing():
            self.error = "closed by the server"
        if not self.ready.done():
            self.ready.set_result(None)


def ws_payload(number: int) -> bytes:
    """100 bytes starting with the connection's number, so crossed echoes are caught."""
    return b"%07d" % number + b"m" * 93


async def ws_echo(port: int, host: str, connections: int, duration: float) -> dict[str, float]:
    counter = [0]
    numbers = itertools.count()
    conns = [c for c in await open_all(port, connections, lambda: WsEcho(
        host, ws_payload(next(numbers)), counter)) if isinstance(c, WsEcho)]
    # A handshake never answered is an error to report, not a hang of the bench.
    await asyncio.wait([asyncio.ensure_future(c.ready) for c in conns], timeout=30)
    for conn in conns:
        if not conn.ready.done():
            conn.fail("no handshake answer in 30 s")
    refused = [c.error for c in conns if c.error]
    if refused:
        return {"messages_per_s": 0.0, "errors": len(refused), "first_error": refused[0]}  # type: ignore[dict-item]
    for conn in conns:
        conn.start()
    await asyncio.sleep(1.0)  # warm-up
    before, start = counter[0], time.monotonic()
    await asyncio.sleep(duration)
    messages, elapsed = counter[0] - before, time.monotonic() - start
    errors = [c.error for c in conns if c.error]
    for conn in conns:
        if conn.transport is not None:
            conn.transport.close()
    return {"messages_per_s": messages / elapsed, "messages": messages,
            "errors": len(errors), "first_error": errors[0] if errors else ""}  # type: ignore[dict-item]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("paced", "ws"))
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("--path", default="/")
    parser.add_argument("--connections", type=int, required=True)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--hold", action="store_true")
    options = parser.parse_args()
    raise_open_files()
    if options.kind == "paced":
        result = uvloop.run(paced(options.port, options.host, options.path,
                                  options.connections, options.rate, options.duration,
                                  options.hold))
    else:
        result = uvloop.run(ws_echo(options.port, options.host, options.connections,
                                    options.duration))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
