"""A loopback HTTP proxy that can lose or change the service's answers: a real network
fault between the SDK and the real service, not a stand-in for either.

One request per connection (it forwards with ``connection: close``), so each request
is one numbered exchange. ``on_response(n, request_body, response)`` sees the n-th
exchange (from 0) after the service answered it, and returns the bytes to send back, or
``None`` to close the client's connection without a byte, as a dropped link does.
``in_front(n, request_body)`` is asked first and may answer in the service's place (bytes:
the request never reaches it), as a gateway's rate limit does; ``None`` forwards it.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

OnResponse = Callable[[int, bytes, bytes], bytes | None]
InFront = Callable[[int, bytes], bytes | None]
TIMEOUT = 30.0


def passthrough(n: int, request: bytes, response: bytes) -> bytes | None:
    return response


@dataclass
class Proxy:
    upstream_port: int
    on_response: OnResponse = passthrough
    in_front: InFront | None = None
    port: int = 0
    bodies: list[bytes] = field(default_factory=list)  # each request body, in order
    statuses: list[int] = field(default_factory=list)  # what the service answered
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def handle(self, client: socket.socket) -> None:
        try:
            self._exchange(client)
        except OSError:  # the client went away first: nothing to forward to
            client.close()

    def _exchange(self, client: socket.socket) -> None:
        with client:
            client.settimeout(TIMEOUT)
            head, body = read_request(client)
            with self._lock:
                n = len(self.bodies)
                self.bodies.append(body)
            answer = None if self.in_front is None else self.in_front(n, body)
            if answer is None:
                answer = self._forward(n, head, body)
            else:
                self.statuses.append(int(answer.split(b" ", 2)[1]))
            if answer is not None:
                client.sendall(answer)

    def _forward(self, n: int, head: bytes, body: bytes) -> bytes | None:
        with socket.create_connection(("127.0.0.1", self.upstream_port),
                                      timeout=TIMEOUT) as upstream:
            upstream.sendall(close_after(head) + body)
            response = read_to_end(upstream)
        self.statuses.append(int(response.split(b" ", 2)[1]))
        return self.on_response(n, body, response)


def read_request(conn: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("the client closed before a whole request head")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("the client closed before the whole body")
        body += chunk
    return head + b"\r\n\r\n", body


def close_after(head: bytes) -> bytes:
    lines = [line for line in head.rstrip(b"\r\n").split(b"\r\n")
             if line.split(b":", 1)[0].strip().lower() not in (b"connection", b"keep-alive")]
    return b"\r\n".join([*lines, b"connection: close"]) + b"\r\n\r\n"


def read_to_end(conn: socket.socket) -> bytes:
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    return data


def with_body(response: bytes, body: bytes) -> bytes:
    """The same answer with another body (and its content-length)."""
    head = response.partition(b"\r\n\r\n")[0]
    lines = [line for line in head.split(b"\r\n")
             if line.split(b":", 1)[0].strip().lower() != b"content-length"]
    return b"\r\n".join([*lines, f"content-length: {len(body)}".encode()]) + b"\r\n\r\n" + body


def body_of(response: bytes) -> bytes:
    return response.partition(b"\r\n\r\n")[2]


@contextmanager
def running_proxy(upstream_port: int, on_response: OnResponse = passthrough, *,
                  in_front: InFront | None = None) -> Iterator[Proxy]:
    proxy = Proxy(upstream_port, on_response, in_front)
    listener = socket.create_server(("127.0.0.1", 0))
    proxy.port = listener.getsockname()[1]
    listener.settimeout(0.2)  # so the accept loop sees ``stop``
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=proxy.handle, args=(client,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        stop.set()
        listener.close()
        thread.join(timeout=5)
