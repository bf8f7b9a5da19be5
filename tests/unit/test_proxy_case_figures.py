"""The pure parts of bench/proxy_cases.py: percentiles and per-round ratios, the framing
helpers of its clients and origins, and the section rendered from the kept per-case
results (a rerun of one case replaces only that case). The benchmark itself runs for
minutes; it is not part of the suite (tests/unit/test_proxy_case_load.py runs its load
generators for a second each)."""

from __future__ import annotations

import hashlib
import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def bench_module(name: str) -> ModuleType:
    sys.path.insert(0, str(BENCH))  # the benches import each other as top-level modules
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


@pytest.fixture(scope="module")
def figures() -> ModuleType:
    return bench_module("case_figures")


def test_percentile_is_the_nearest_rank(figures: ModuleType) -> None:
    values = [float(v) for v in range(1, 101)]
    assert figures.percentile(values, 99) == 99.0
    assert figures.percentile(values, 50) == 50.0
    assert figures.percentile([5.0], 99) == 5.0
    assert figures.percentile([], 99) == 0.0
    assert figures.percentile([1.0, 2.0, 3.0], 100) == 3.0


def test_ratios_are_taken_per_round_then_the_median(figures: ModuleType) -> None:
    rounds = [{"nginx": {"rps": 100.0}, "router": {"rps": 60.0}},
              {"nginx": {"rps": 50.0}, "router": {"rps": 40.0}},
              {"nginx": {"rps": 200.0}, "router": {"rps": 100.0}}]
    assert figures.median_ratio(rounds, "router", "nginx", "rps") == pytest.approx(0.6)
    # not the ratio of the medians (60 / 100)
    assert figures.median_of(rounds, "router", "rps") == 60.0
    assert figures.median_difference(rounds, "router", "nginx", "rps") == -40.0


def result(figures: ModuleType, case: int, rps: float, met: bool) -> Any:
    return figures.CaseResult(
        case=case, title=f"case {case} title", run="Run today.", load="wrk -c64",
        targets={"nginx": "nginx proxy", "router": "router"},
        columns=[figures.Column("rps", "req/s", ",.0f"),
                 figures.Column("p99_ms", "p99", ".2f", " ms")],
        rounds=[{"nginx": {"rps": 2000.0, "p99_ms": 1.5},
                 "router": {"rps": rps, "p99_ms": 3.25}}],
        checks=[figures.Check("router req/s vs nginx's", f"{rps / 2000:.0%}", ">= 50%", met)],
        configuration=[("nginx", "nginx", "worker_processes 2;")], notes=["Why it falls short."])


def test_a_case_renders_its_checks_medians_rounds_and_configuration(
        figures: ModuleType) -> None:
    text = figures.render_case(result(figures, 2, 700.0, False))
    assert text.startswith("### Case 2: case 2 title (below target)")
    assert "- router req/s vs nginx's: **35%** (target >= 50%: MISSED)" in text
    assert "| router | 700 | 3.25 ms |" in text
    assert "| 1 | nginx | 2,000 | 1.50 ms |" in text
    assert "```nginx\nworker_processes 2;\n```" in text
    assert "Why it falls short." in text
    assert "(all targets met)" in figures.render_case(result(figures, 2, 1500.0, True))
    reported = result(figures, 2, 1500.0, True)
    reported.checks.append(figures.Check("CPU per MB vs nginx's", "1.10x", "", True))
    assert "- CPU per MB vs nginx's: **1.10x** (reported; no target)" in figures.render_case(
        reported)


def test_rerunning_one_case_keeps_the_others(figures: ModuleType, tmp_path: Path) -> None:
    kept = tmp_path / "cases.json"
    figures.save_results(kept, {1: result(figures, 1, 1500.0, True),
                                2: result(figures, 2, 700.0, False)})
    results = figures.load_results(kept)
    results[2] = result(figures, 2, 1900.0, True)  # case 2 rerun
    figures.save_results(kept, results)
    section = figures.render_section(figures.load_results(kept), "Intro.", "### Shared\n")
    assert section.startswith(figures.HEADING + "\n\nIntro.\n")
    assert section.index("### Case 1") < section.index("### Case 2")
    assert "| router | 1,500 |" in section and "| router | 1,900 |" in section
    assert "| router | 700 |" not in section
    assert section.endswith("### Shared\n")
    assert figures.load_results(tmp_path / "absent.json") == {}


def test_origin_frames_requests_by_content_length() -> None:
    origins = bench_module("case_origins")
    data = b"POST /digest HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\n"
    head, body, rest = origins.split_request(data)
    assert head.endswith(b"Content-Length: 3") and body == b"abc"
    assert rest == b"GET / HTTP/1.1\r\n"
    assert origins.split_request(rest) is None  # head not complete yet
    assert origins.split_request(data[:-len(rest) - 1]) is None  # body not complete yet
    assert origins.digest_answer(b"abc") == (
        b"3 " + hashlib.sha256(b"abc").hexdigest().encode())


def test_client_frames_answers_and_websocket_messages() -> None:
    clients = bench_module("case_clients")
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody"
    assert clients.response_length(answer) == (200, len(answer))
    assert clients.response_length(b"HTTP/1.1 502 Bad") is None
    frame = clients.ws_frame(clients.ws_payload(7))
    assert frame[:2] == bytes([0x82, 0x80 | 100]) and len(frame) == 2 + 4 + 100
    unmasked = bytes(b ^ clients.MASK[i % 4] for i, b in enumerate(frame[6:]))
    assert unmasked == b"0000007" + b"m" * 93
    # RFC 6455 section 1.3's example key and accept value
    assert clients.accept_for("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


def test_a_shortfall_note_quotes_the_round_figures() -> None:
    notes = bench_module("case_notes")
    rows = [{"nginx": {"us_per_req": 30.0, "cpu": 50.0, "rps": 16000.0},
             "router": {"us_per_req": 180.0, "cpu": 90.0, "rps": 5000.0}}]
    text = notes.post_note(rows)
    assert "180 us of CPU per request against nginx's 30 us (6.0x" in text
    assert "90% of a core against nginx's 50%" in text


def test_the_slow_origin_note_says_which_part_of_the_p99_is_the_routers() -> None:
    notes = bench_module("case_notes")

    def rows(router_rps: float) -> list[dict[str, dict[str, float]]]:
        fields = {"us_per_req": 50.0, "cpu": 50.0, "added_p99_ms": 20.0,
                  "steady_added_ms": 1.0, "fast_alone_p99_ms": 2.0, "fast_during_p99_ms": 6.0}
        return [{"origin": {**fields, "rps": 9_700.0},
                 "nginx": {**fields, "rps": 9_600.0, "us_per_req": 30.0},
                 "router": {**fields, "rps": router_rps, "steady_added_ms": 3.8,
                            "added_p99_ms": 70.0, "fast_during_p99_ms": 5.5}}]

    kept_up = notes.slow_note(rows(9_500.0))
    assert "it kept up with the 2,000 clients" in kept_up
    assert "added 3.8 ms at p99 over the origin's (nginx 1.0 ms" in kept_up
    assert "nginx added 20 ms over the whole run" in kept_up
    assert ("moved from 2.00 to 5.50 ms through the router, from 2.00 to 6.00 ms through "
            "nginx") in kept_up
    behind = notes.slow_note(rows(8_000.0))
    assert "kept up" not in behind
    assert "requests queue in its processes behind the CPU" in behind
    assert "the router answered 8,000 req/s (83% of nginx's 9,600)" in behind


def test_connection_costs_are_the_close_runs_cpu_over_the_keep_alive_runs() -> None:
    bench = bench_module("connection_cpu")
    run = bench.Run

    def round_of(nginx: tuple[float, float, float], router: tuple[float, float, float],
                 errors: str = "") -> list[Any]:
        return [run("nginx", "keep-alive", 20_000.0, nginx[0], ""),
                run("nginx", "close", 7_000.0, nginx[1], ""),
                run("nginx", "origin-close", 9_000.0, nginx[2], ""),
                run("router", "keep-alive", 12_000.0, router[0], errors),
                run("router", "close", 4_000.0, router[1], ""),
                run("router", "origin-close", 5_000.0, router[2], "")]

    rounds = [round_of((35.0, 85.0, 75.0), (90.0, 240.0, 200.0)),
              round_of((40.0, 80.0, 90.0), (95.0, 255.0, 215.0)),
              round_of((30.0, 90.0, 70.0), (80.0, 250.0, 180.0), "non-2xx/3xx: 2")]
    assert bench.per_connection(rounds[0], "router") == 150.0
    assert bench.per_connection(rounds[0], "nginx") == 50.0
    assert bench.per_connection(rounds[0], "router", "origin-close") == 110.0
    # 2,000 requests at 90 + 150 + 110 us over 2 processes: 350 ms to serve, half of it
    assert bench.burst_ms(rounds[0], "router", 2) == 175.0
    assert bench.burst_ms(rounds[0], "nginx", 1) == 125.0
    info = {"date": "2026-11-26 17:00 UTC", "uname -m": "x86_64", "nproc": "2",
            "python": "3.11.7", "nginx -v": "nginx/1.22.1", "wrk": "wrk 4.1.0",
            "libraries": "uvloop 0.23.0", "load average at start": "0.10 0.20 0.30"}
    section = bench.render(rounds, info, 2)
    assert section.startswith(bench.HEADING + "\n")
    # medians of the per-connection figures (150, 160, 170 and 50, 40, 60) and of the
    # per-round ratios (3.00, 4.00, 2.83); origin connections 110, 120, 100 against 40,
    # 50, 40 (ratios 2.75, 2.40, 2.50)
    assert ("a new client connection costs the router **160 us** of CPU beyond its "
            "request, nginx 50 us: **x3.00**") in section
    assert ("a new origin connection costs the router **110 us** of CPU beyond its "
            "request, nginx 40 us: **x2.50**") in section
    # bursts: router 175, 187.5, 175 ms; nginx 62.5, 65, 65 ms
    assert "is about **175 ms** for the router and 65 ms for nginx" in section
    assert "needs about 20 us a request" in section
    assert ("| 2 | router | 12,000 | 95 us | 4,000 | 255 us | 160 us | 5,000 | 215 us "
            "| 120 us | 188 ms |") in section
    assert "Errors reported by wrk: router keep-alive: non-2xx/3xx: 2" in section
    assert "``" not in section
