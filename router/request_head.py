"""One HTTP/1.1 request head as httptools reports it: the fast path's parser callbacks
(router/fast_protocol.py), holding only what deciding and forwarding a request needs."""

from __future__ import annotations

import httptools

from router.headers import Headers


class RequestHead:
    """What the parser reports about one request head (httptools callbacks)."""

    __slots__ = ("chunked", "complete", "expect", "headers", "hosts", "keep_alive", "length",
                 "method", "parser", "upgrade", "url", "version")

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        # As uvicorn's parser: answer the first of pipelined requests sent before a close.
        self.parser.set_dangerous_leniencies(lenient_data_after_close=True)
        self.url = b""
        self.headers: Headers = []
        self.complete = False
        self.expect = False
        self.method = b""
        self.version = "1.1"
        self.keep_alive = True
        self.upgrade = False
        self.hosts = 0
        self.length: bytes | None = None  # Content-Length, as the parser accepted it
        self.chunked = False  # any Transfer-Encoding

    def spend(self) -> None:
        """The connection is gone: drop the parser, which holds this object's methods, so
        that both go when the protocol does rather than at the collector's next pass."""
        self.parser = SPENT

    def on_message_begin(self) -> None:
        self.url = b""
        self.headers = []
        self.complete = False
        self.expect = False
        self.hosts = 0
        self.length = None
        self.chunked = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()  # as uvicorn gives them (the header policy expects it)
        if name == b"expect":
            self.expect = True
        elif name == b"host":
            self.hosts += 1
        elif name == b"content-length":
            self.length = value
        elif name == b"transfer-encoding":
            self.chunked = True
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        # Read here, as uvicorn does: once the message is complete the parser has moved on.
        parser = self.parser
        self.method = parser.get_method()
        self.version = parser.get_http_version()
        self.keep_alive = self.version != "1.0" and parser.should_keep_alive()
        self.upgrade = parser.should_upgrade()

    def on_message_complete(self) -> None:
        self.complete = True


# A lost connection's head parser (see RequestHead.spend); it is never fed.
SPENT = httptools.HttpRequestParser(object())
