"""What bench/proxy_cases.py says under a case that falls short: the measured figures that
explain it (CPU per unit of work against nginx's, the share of the box each got), written
from the round figures so the words always match the numbers."""

from __future__ import annotations

from case_figures import Round, median_of, median_ratio

# One router process under cProfile with a case's load at half the connections
# (bench/case_profile.py), rendered under the cases whatever case is rerun; update them
# with the code they describe.
PROFILES: dict[int, str] = {
    2: ("`bench/case_profile.py post`, 2026-11-25 20:19 UTC on the merged code (bodies "
        "through the fast path), load average about 5: 1,320 req/s from one process at 71% "
        "of a core; 83% of the profiled time in our code, all of it on the fast path "
        "(`FastProtocol._read_head` and `_serve`, `FastPath.plan`, `plan_request` and "
        "`plan_response`, the origin connection's `begin`, which writes the head and the "
        "16 KB body, `data_received` and its header callbacks, `FastExchange._finish`, "
        "`write_now`), 16% builtins, uvicorn 0.2%. No one function over 7% of it: what "
        "remains is per-request Python (parsing both heads, planning both header sets) "
        "where nginx runs C."),
    4: ("`bench/case_profile.py slow`, 2026-11-25 20:20 UTC on the merged code, load "
        "average about 4.5: one process, 1,000 connections, 1,249 req/s, p50 330 ms, p99 "
        "4.07 s, 68% of a core; 83% of the profiled time in our code, all on the fast path "
        "(the same functions as case 2's, with as many fast-path heads as answers: the "
        "requests did not fall back to the ASGI path), 14% builtins, uvicorn 1%. The process "
        "got about its fair share of two cores shared with wrk, the origin and other jobs, "
        "and at 150 to 180 us of CPU per request (nginx: 40 to 50) that share answers 4,000 "
        "to 4,500 req/s of the 10,000 asked for; requests wait for the CPU. The p99 in seconds "
        "is mostly the start of each run, when wrk opens its 2,000 connections at once: "
        "`bench/case_profile.py accept router` (20:24 UTC, load average about 3) showed up to "
        "1,400 connections waiting in the two processes' accept queues 0.3 s in and some "
        "for 2 s (the kernel completes the handshake, wrk sends its request, the process "
        "accepts it later: each accepted connection costs Python work in `connection_made`), "
        "p99 1.17 s against p50 249 ms; nginx's queue stayed empty (`accept nginx`: p99 "
        "345 ms, p50 202 ms)."),
}


def cpu_sentence(rows: list[Round], metric: str, unit: str, work: str) -> str:
    router, nginx = median_of(rows, "router", metric), median_of(rows, "nginx", metric)
    return (f"The router spent {router:.0f} {unit} of CPU per {work} against nginx's "
            f"{nginx:.0f} {unit} ({router / nginx:.1f}x; proxy processes only, from /proc), "
            f"with {median_of(rows, 'router', 'cpu'):.0f}% of a core against nginx's "
            f"{median_of(rows, 'nginx', 'cpu'):.0f}% (the 2 cores are shared with the load "
            "generator, the origin and, on this box, other jobs: see the load average).")


def big_note(rows: list[Round]) -> str:
    return (cpu_sentence(rows, "ms_per_mb", "ms", "MB") + " A 1 MiB answer is too large for "
            "the fast path's one write (router/fast_exchange.py): it is streamed by the ASGI "
            "path, through uvicorn's flow control, chunk by chunk.")


def post_note(rows: list[Round]) -> str:
    return (cpu_sentence(rows, "us_per_req", "us", "request") + " A 16 KB body with a "
            "Content-Length stays on the router's own protocol: it is held whole, then sent "
            "with the head in one write (router/fast_protocol.py, bodies up to 64 KiB); "
            "its profile is under the cases.")


def idle_note(rows: list[Round]) -> str:
    return (f"p99 {median_of(rows, 'router', 'p99_ms'):.2f} ms against nginx's "
            f"{median_of(rows, 'nginx', 'p99_ms'):.2f} ms at the same 1,000 req/s; the "
            f"router's processes used {median_of(rows, 'router', 'cpu'):.0f}% of a core "
            f"against nginx's {median_of(rows, 'nginx', 'cpu'):.0f}%.")


def slow_note(rows: list[Round]) -> str:
    rate = median_ratio(rows, "router", "nginx", "rps")
    return (cpu_sentence(rows, "us_per_req", "us", "request") + " 2,000 clients each "
            "waiting 200 ms ask for up to 10,000 req/s; the router answered "
            f"{median_of(rows, 'router', 'rps'):,.0f} req/s ({rate:.0%} of nginx's "
            f"{median_of(rows, 'nginx', 'rps'):,.0f}), so requests queue in its processes "
            "behind the CPU they need and the queueing, not the origin, sets its p99. nginx "
            f"added {median_of(rows, 'nginx', 'added_p99_ms'):.0f} ms at p99 itself on the "
            "same box (it answered "
            f"{median_ratio(rows, 'nginx', 'origin', 'rps'):.0%} of the origin's direct rate). The "
            "fast app shares those processes and that queue; nginx's fast app p99 moved from "
            f"{median_of(rows, 'nginx', 'fast_alone_p99_ms'):.2f} to "
            f"{median_of(rows, 'nginx', 'fast_during_p99_ms'):.2f} ms under the same load "
            "on the same box.")


def ws_note(rows: list[Round]) -> str:
    return (cpu_sentence(rows, "us_per_message", "us", "message") + " Each message crosses "
            "uvicorn's websockets-sansio protocol, the ASGI receive and send queues and "
            "aiohttp's client WebSocket (router/websocket_proxy.py) in each direction, with "
            "two tasks per connection; nginx relays the bytes.")
