"""A DNS server on loopback (UDP) whose answers the test sets.

It stands in for public DNS, the edge of the world the service cannot own in a test: the
service under test asks it real DNS questions over a real socket (dnspython builds and
parses the messages on both sides), so everything after the answer is the production code.

    with dns_server({"game.apps.example.com": ["203.0.113.7"]}) as dns:
        DnsResolver(nameserver=dns.host, port=dns.port)...
        dns.records["other.example.com"] = ["2001:db8::1"]  # change answers at any time
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import dns.flags
import dns.message
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset


@dataclass
class DnsServer:
    host: str
    port: int
    # name (lower-case, no trailing dot) -> addresses; a missing name answers NXDOMAIN
    records: dict[str, list[str]] = field(default_factory=dict)
    # names that get no answer at all (the client times out)
    silent: set[str] = field(default_factory=set)
    questions: list[tuple[str, str]] = field(default_factory=list)  # (name, type)

    def answer(self, wire: bytes) -> bytes | None:
        query = dns.message.from_wire(wire)
        response = dns.message.make_response(query)
        response.flags |= dns.flags.AA
        if not query.question:
            response.set_rcode(dns.rcode.FORMERR)
            return response.to_wire()
        question = query.question[0]
        name = question.name.to_text().rstrip(".").lower()
        kind = dns.rdatatype.to_text(question.rdtype)
        self.questions.append((name, kind))
        if name in self.silent:
            return None
        if name not in self.records:
            response.set_rcode(dns.rcode.NXDOMAIN)
            return response.to_wire()
        version = {"A": 4, "AAAA": 6}.get(kind)
        found = [a for a in self.records[name] if ipaddress.ip_address(a).version == version]
        if found:
            response.answer.append(dns.rrset.from_text_list(
                question.name, 30, dns.rdataclass.IN, question.rdtype, found))
        return response.to_wire()


@contextmanager
def dns_server(records: dict[str, list[str]] | None = None) -> Iterator[DnsServer]:
    """Serve ``records`` on 127.0.0.1 (a free UDP port) until the block ends."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.1)
    server = DnsServer("127.0.0.1", sock.getsockname()[1], dict(records or {}))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                wire, peer = sock.recvfrom(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            with suppress(Exception):  # a malformed question gets no answer, like a real server
                reply = server.answer(wire)
                if reply is not None:
                    sock.sendto(reply, peer)

    thread = threading.Thread(target=serve, daemon=True, name="test-dns")
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        thread.join(timeout=5)
        sock.close()
