"""The SDK's clients reach ``*.localhost`` on loopback (RFC 6761 6.3) whatever the system
resolver says, keeping the name as ``Host``: ``svc-server dev``'s API is
``http://api.localhost:8000``, a name plain glibc does not resolve."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from svc.client import DeveloperClient, ServiceUnreachable
from svc.loopback import AsyncLoopbackNames, LoopbackNames, is_localhost_name


class EchoHost(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"host": self.headers["host"], "path": self.path}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoHost)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_localhost_names() -> None:
    assert all(map(is_localhost_name, ("localhost", "api.localhost", "A.B.LOCALHOST.")))
    assert not any(map(is_localhost_name, ("localhost.example.com", "mylocalhost", "")))


def test_clients_reach_localhost_names_with_the_name_as_host(port: int) -> None:
    with DeveloperClient(f"http://api.localhost:{port}") as client:
        assert client.call("GET", "/me") == {"host": f"api.localhost:{port}",
                                             "path": "/api/developer/me"}
    with httpx.Client(transport=LoopbackNames()) as plain:
        assert plain.get(f"http://portal.localhost:{port}/x").json()["host"] == \
            f"portal.localhost:{port}"

    async def fetch() -> str:
        async with httpx.AsyncClient(transport=AsyncLoopbackNames()) as client:
            answer = await client.get(f"http://api.localhost:{port}/y")
            host: str = answer.json()["host"]
            return host
    assert asyncio.run(fetch()) == f"api.localhost:{port}"


def test_other_names_are_left_to_the_resolver(port: int) -> None:
    # .invalid never resolves (RFC 6761 6.4): no rewrite, so the request fails.
    with DeveloperClient(f"http://api.localhost.invalid:{port}", timeout=5) as client, \
            pytest.raises(ServiceUnreachable):
        client.call("GET", "/me")
