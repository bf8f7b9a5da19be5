"""The head checks of router/head_limits.py on bytes: a head checked whole and the same
head checked as it arrives, a byte at a time, give the same verdict."""

from __future__ import annotations

import pytest

from router.head_limits import HeadLimits, HeadRefused, HeadScan, check_whole, host_in

LIMITS = HeadLimits(request_line=100, header_line=60, head=400, headers=5)


def head(*lines: str, target: str = "/") -> bytes:
    return (f"GET {target} HTTP/1.1\r\n" + "".join(f"{line}\r\n" for line in lines)
            + "\r\n").encode()


def verdict_whole(data: bytes) -> int | None:
    end = data.find(b"\r\n\r\n")
    try:
        if end < 0:
            HeadScan(LIMITS).check(data)
            return None
        check_whole(data, end + 4, HeadScan(LIMITS))
    except HeadRefused as refused:
        return refused.status
    return 200


def verdict_dripped(data: bytes) -> int | None:
    scan = HeadScan(LIMITS)
    try:
        for size in range(1, len(data) + 1):
            end = scan.check(data[:size])
            if end is not None:
                return 200
    except HeadRefused as refused:
        return refused.status
    return None


CASES = [
    (head("Host: a"), 200),
    (head("Host: a", "X: " + "v" * 57), 200),  # a 60-byte line: at the limit
    (head("Host: a", "X: " + "v" * 58), 431),
    (head(target="/" + "t" * 86), 200),  # a 100-byte request line
    (head(target="/" + "t" * 87), 414),
    (head("A: 1", "B: 2", "C: 3", "D: 4", "E: 5"), 200),
    (head("A: 1", "B: 2", "C: 3", "D: 4", "E: 5", "F: 6"), 431),
    (head(*[f"X-{i}: " + "v" * 53 for i in range(5)], target="/" + "t" * 85), 431),  # 403 B
    (b"\r\n" + head("Host: a"), 200),  # an empty line before the request is allowed
    (b"GET / HTTP/1.1\nHost: a\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost: a\n\n", 400),
]


@pytest.mark.parametrize(("data", "status"), CASES)
def test_whole_and_dripped_heads_get_the_same_verdict(data: bytes, status: int) -> None:
    assert verdict_whole(data) == status
    assert verdict_dripped(data) == status


def test_an_unfinished_head_is_refused_as_soon_as_it_breaks_a_limit() -> None:
    scan = HeadScan(LIMITS)
    assert scan.check(b"GET / HTTP/1.1\r\nX: " + b"v" * 58) is None  # may still end in time
    with pytest.raises(HeadRefused) as refused:
        scan.check(b"GET / HTTP/1.1\r\nX: " + b"v" * 60)
    assert refused.value.status == 431
    with pytest.raises(HeadRefused) as refused:
        HeadScan(LIMITS).check(b"GET /" + b"t" * 200)
    assert refused.value.status == 414


def test_a_bare_lf_is_malformed_not_a_limit() -> None:
    with pytest.raises(HeadRefused) as refused:
        HeadScan(LIMITS).check(b"GET / HTTP/1.1\n")
    assert refused.value.malformed and refused.value.status == 400


def test_the_blank_line_search_resumes_where_the_last_line_ended() -> None:
    scan = HeadScan(LIMITS)
    data = b"GET / HTTP/1.1\r\nHost: a\r\nX: 1"
    assert scan.check(data) is None
    assert data.find(b"\r\n", scan.resume_at) == data.index(b"\r\nX")


def test_host_in_finds_the_first_host_of_a_partial_head() -> None:
    assert host_in(b"GET / HTTP/1.1\r\nX: 1\r\nhOsT :  game.apps.localhost \r\nHost: b") == \
        b"game.apps.localhost"
    assert host_in(b"GET / HTTP/1.1\r\nX-Host: a") is None
