"""Requests to a developer's runtime origin that cannot be steered into our network.

The origin's name is checked and resolved by the shared policy (``manifest.url_policy``);
the socket connects to exactly one of the checked addresses while ``Host`` and TLS SNI
carry the name, so no second lookup can rebind it. Every exchange has one deadline (resolve,
connect, TLS, request and answer together: a server dripping a byte at a time cannot hold
us), a body limit (checked against ``Content-Length`` before reading and again while
reading), and redirects are followed only within the same origin, at most a few times.

Plain blocking sockets and h11: verification runs on a worker thread, one request at a time,
and an explicit socket timeout before every read is what makes the deadline exact.
"""

from __future__ import annotations

import re
import socket
import ssl
import time
from dataclasses import dataclass
from ipaddress import ip_address
from urllib.parse import urljoin, urlsplit

import h11

from manifest.addresses import IPAddress
from manifest.url_policy import CheckedUrl, Resolver, UrlPolicy, UrlRefused, resolve_checked

USER_AGENT = "svc-runtime-verifier/1"
_READ_SIZE = 65536
# What h11 accepts as a Content-Length. str.isdigit() would also pass "²" (Latin-1 0xB2),
# which int() refuses.
_LENGTH = re.compile(r"[0-9]{1,20}")


@dataclass(frozen=True, slots=True)
class FetchLimits:
    timeout: float = 5.0  # one whole exchange, redirects included
    max_body_bytes: int = 64 * 1024
    max_redirects: int = 3


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: tuple[tuple[str, str], ...]  # names lower-case
    body: bytes
    path: str  # the path that answered (after same-origin redirects)
    address: str  # the IP address connected to

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None


class FetchFailed(Exception):
    """No usable answer. ``kind``: refused, connect, tls, timeout, too_large, redirect,
    protocol. ``message`` never includes more than the origin the developer gave."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class OriginClient:
    """HTTP/1.1 to checked origins. ``ssl_context`` decides whose certificates are trusted:
    the system store in production, a test CA in tests."""

    def __init__(self, policy: UrlPolicy, resolver: Resolver, ssl_context: ssl.SSLContext,
                 limits: FetchLimits | None = None) -> None:
        self.policy = policy
        self.resolver = resolver
        self.ssl_context = ssl_context
        self.limits = limits or FetchLimits()

    def request(self, origin: CheckedUrl, method: str, path: str, *, body: bytes = b"",
                headers: tuple[tuple[str, str], ...] = (), follow_redirects: bool = False,
                ) -> Answer:
        deadline = time.monotonic() + self.limits.timeout
        try:
            addresses = resolve_checked(origin, self.policy, self.resolver)
        except UrlRefused as exc:
            kind = "dns" if exc.transient or exc.rule == "does_not_resolve" else "refused"
            raise FetchFailed(kind, exc.message) from None
        for _ in range(self.limits.max_redirects + 1):
            answer = self._exchange(origin, addresses, deadline, method, path, body, headers)
            location = answer.header("location")
            if not (follow_redirects and 300 <= answer.status < 400 and location):
                return answer
            path = self._same_origin_path(origin, path, location)
            addresses = [ip_address(answer.address)]  # stay on the address already checked
        raise FetchFailed("redirect", f"more than {self.limits.max_redirects} redirects")

    def _same_origin_path(self, origin: CheckedUrl, path: str, location: str) -> str:
        base = f"{origin.scheme}://{origin.host_header}"
        target = urljoin(base + path, location.strip())
        parts = urlsplit(target)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            port = -1
        host = (parts.hostname or "").strip("[]").lower()
        if (parts.scheme, host, port) != (origin.scheme, origin.host, origin.port):
            shown = target if len(target) <= 120 else target[:119] + "…"
            raise FetchFailed("redirect", f"redirected off the origin, to {shown}; redirects "
                                          "are followed only within the origin")
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    def _exchange(self, origin: CheckedUrl, addresses: list[IPAddress], deadline: float,
                  method: str, path: str, body: bytes,
                  extra: tuple[tuple[str, str], ...]) -> Answer:
        sock, address = self._connect(origin, addresses, deadline)
        try:
            request = h11.Request(method=method, target=path, headers=[
                ("Host", origin.host_header), ("User-Agent", USER_AGENT),
                ("Accept", "application/json"), ("Connection", "close"),
                ("Content-Length", str(len(body))), *extra])
            conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=16 * 1024)
            _send(sock, deadline, conn.send(request))
            if body:
                _send(sock, deadline, conn.send(h11.Data(data=body)))
            _send(sock, deadline, conn.send(h11.EndOfMessage()))
            return self._read(sock, conn, deadline, path, address)
        except TimeoutError:
            raise FetchFailed("timeout", f"no complete answer within {self.limits.timeout:g} s"
                              ) from None
        except h11.ProtocolError as exc:
            raise FetchFailed("protocol", f"not a valid HTTP/1.1 answer ({exc})") from None
        except ssl.SSLError as exc:
            raise FetchFailed("tls", f"TLS failed: {exc.reason or exc}") from None
        except OSError as exc:
            raise FetchFailed("connect", f"the connection failed: "
                                         f"{exc.strerror or type(exc).__name__}") from None
        finally:
            sock.close()

    def _connect(self, origin: CheckedUrl, addresses: list[IPAddress],
                 deadline: float) -> tuple[socket.socket, str]:
        failure = "no address to connect to"
        for ip in addresses:
            try:
                sock = socket.create_connection((str(ip), origin.port),
                                                timeout=_remaining(deadline))
            except TimeoutError:
                raise FetchFailed("timeout", f"connecting took longer than "
                                             f"{self.limits.timeout:g} s") from None
            except OSError as exc:
                failure = exc.strerror or type(exc).__name__
                continue
            if origin.scheme != "https":
                return sock, str(ip)
            try:
                sock.settimeout(_remaining(deadline))
                # The name, never the address, is what the certificate must match.
                return self.ssl_context.wrap_socket(sock, server_hostname=origin.host), str(ip)
            except TimeoutError:
                sock.close()
                raise FetchFailed("timeout", "the TLS handshake did not finish in "
                                             f"{self.limits.timeout:g} s") from None
            except ssl.SSLCertVerificationError as exc:
                sock.close()
                raise FetchFailed("tls", f"the certificate is not valid for {origin.host}: "
                                         f"{exc.verify_message or exc.reason}") from None
            except (ssl.SSLError, OSError) as exc:
                sock.close()
                raise FetchFailed("tls", f"TLS failed: {getattr(exc, 'reason', None) or exc}"
                                  ) from None
        raise FetchFailed("connect", f"could not connect to {origin.host}:{origin.port} "
                                     f"({failure})")

    def _read(self, sock: socket.socket, conn: h11.Connection, deadline: float, path: str,
              address: str) -> Answer:
        limit = self.limits.max_body_bytes
        status, body = 0, bytearray()
        headers: tuple[tuple[str, str], ...] = ()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                sock.settimeout(_remaining(deadline))
                conn.receive_data(sock.recv(_READ_SIZE))
            elif isinstance(event, h11.Response):
                status = event.status_code
                headers = tuple((k.decode("latin-1").lower(), v.decode("latin-1"))
                                for k, v in event.headers)
                declared = dict(headers).get("content-length", "")
                if _LENGTH.fullmatch(declared) and int(declared) > limit:
                    raise FetchFailed("too_large", f"the answer declares {declared} bytes; "
                                                   f"the limit is {limit}")
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > limit:
                    raise FetchFailed("too_large", f"the answer is over {limit} bytes")
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                if not status:
                    raise FetchFailed("protocol", "the connection closed without an answer")
                return Answer(status, headers, bytes(body), path, address)


def _send(sock: socket.socket, deadline: float, data: bytes | None) -> None:
    if data:
        sock.settimeout(_remaining(deadline))
        sock.sendall(data)


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left
