"""Bounds on a request head, and the answer to a head over them.

Neither httptools nor uvicorn bounds a head: llhttp parses a header of any length and
httptools gathers it in memory until its line ends, so one client sending an endless
header line, or thousands of them, makes the process hold whatever it sends (and the
proxy used to forward it). Every head is held to :class:`HeadLimits` before anything
acts on it, on both HTTP paths: the fast protocol frames heads itself and checks them
with :class:`HeadScan` and :func:`check_whole`; uvicorn's protocol checks them from the
parser's callbacks (``router/server_protocol.py``). Over a limit the answer is 414 (the
request line) or 431, the connection closes, and nothing reaches an origin. Two ``Host``
lines, or an HTTP/1.1 request without one, get 400 (RFC 9112 section 3.2).
``router/head_policy.py`` writes those answers.

The defaults follow nginx (an 8 KB line, ``large_client_header_buffers 4 8k``) with a
32 KB head and 100 header lines; ``SVCSRV_MAX_*`` settings change them
(docs/settings.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CR = 13


@dataclass(frozen=True, slots=True)
class HeadLimits:
    request_line: int = 8 * 1024  # bytes of the request line, without its CRLF
    header_line: int = 8 * 1024  # bytes of one header line, without its CRLF
    head: int = 32 * 1024  # the whole head, with every CRLF and the blank line
    headers: int = 100  # header lines in one head


class HeadRefused(Exception):
    """A head the service will not act on: answer ``status`` and close.

    ``malformed`` heads are not HTTP at all (a bare LF); they are left to uvicorn's
    parser, which answers them as it answers every other malformed head.
    """

    def __init__(self, status: int, why: str, *, malformed: bool = False) -> None:
        super().__init__(why)
        self.status = status
        self.why = why
        self.malformed = malformed


def line_too_long(limits: HeadLimits) -> HeadRefused:
    return HeadRefused(431, f"A request header line is longer than {limits.header_line} "
                            "bytes.")


def request_line_too_long(limits: HeadLimits) -> HeadRefused:
    return HeadRefused(414, f"The request line is longer than {limits.request_line} bytes.")


def head_too_large(limits: HeadLimits) -> HeadRefused:
    return HeadRefused(431, f"The request headers are larger than {limits.head} bytes.")


def too_many_headers(limits: HeadLimits) -> HeadRefused:
    return HeadRefused(431, f"The request has more than {limits.headers} header lines.")


def host_count_refused(hosts: int) -> HeadRefused:
    if hosts == 0:
        return HeadRefused(400, "An HTTP/1.1 request must name its host in a Host header.")
    return HeadRefused(400, "The request has more than one Host header.")


class HeadScan:
    """Checks a head against the limits while its bytes arrive, looking at each byte once
    (a client sending its head a byte at a time must not cost a rescan per byte).

    :meth:`check` is given the head so far, from its first byte, each time more arrives.
    """

    __slots__ = ("_lines", "_pos", "limits", "short", "started")

    def __init__(self, limits: HeadLimits) -> None:
        self.limits = limits
        # A head this short has no line over either line limit, nor over the head limit.
        self.short = min(limits.request_line, limits.header_line, limits.head)
        self._pos = 0  # where the line in progress starts
        self._lines = 0  # complete lines, the request line included
        self.started = False  # part of a head was checked: resume_at is worth asking

    def reset(self) -> None:
        self._pos = 0
        self._lines = 0
        self.started = False

    @property
    def resume_at(self) -> int:
        """Where a search for the blank line (``\r\n\r\n``) can start: it cannot begin
        before the CRLF that ended the last complete line."""
        return max(0, self._pos - 2)

    def check(self, buffer: bytes) -> int | None:
        """The length of the head once its blank line is in ``buffer``; None while more is
        needed. Raises :class:`HeadRefused` as soon as the bytes break a limit."""
        limits = self.limits
        self.started = True
        pos = self._pos
        while (newline := buffer.find(b"\n", pos)) >= 0:
            if newline == 0 or buffer[newline - 1] != _CR:
                raise HeadRefused(400, "A request line ends in a bare LF.", malformed=True)
            length = newline - 1 - pos
            if self._lines == 0:
                if length == 0:  # an empty line before the request line is allowed
                    pos = newline + 1
                    continue
                if length > limits.request_line:
                    raise request_line_too_long(limits)
            elif length == 0:
                end = newline + 1
                if end > limits.head:
                    raise head_too_large(limits)
                self.reset()
                return end
            elif length > limits.header_line:
                raise line_too_long(limits)
            elif self._lines > limits.headers:
                raise too_many_headers(limits)
            self._lines += 1
            pos = newline + 1
        self._pos = pos
        pending = len(buffer) - pos  # the line in progress, perhaps up to its CR
        if self._lines == 0 and pending > limits.request_line + 1:
            raise request_line_too_long(limits)
        if self._lines > 0 and pending > limits.header_line + 1:
            raise line_too_long(limits)
        if len(buffer) > limits.head:
            raise head_too_large(limits)
        return None


def check_whole(buffer: bytes, end: int, scan: HeadScan) -> None:
    """Check the head ``buffer[:end]``, whose blank line (``\\r\\n\\r\\n``) ends at ``end``.

    The common head is checked with a few scans in C: under the shorter line limit, no
    line can be over either. Only a longer head is walked line by line, for the exact
    answer. Resets ``scan`` for the next head.
    """
    if scan.started:
        scan.reset()
    newlines = buffer.count(b"\n", 0, end)
    if newlines != buffer.count(b"\r\n", 0, end):
        raise HeadRefused(400, "A request line ends in a bare LF.", malformed=True)
    if end > scan.short or newlines - 2 > scan.limits.headers:
        # Walked in the order of its bytes: the first rule broken is the one answered, as
        # when the head arrives in pieces.
        found = scan.check(buffer[:end])
        assert found == end  # the walk ends at the same blank line
        scan.reset()


_HOST = re.compile(rb"\r\nhost[ \t]*:[ \t]*([^\r\n]*)", re.IGNORECASE)


def host_in(head: bytes) -> bytes | None:
    """The first Host value of a head that may be partial, for choosing how to answer."""
    found = _HOST.search(head)
    return None if found is None else found.group(1).strip()
