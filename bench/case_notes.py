"""What bench/proxy_cases.py says under a case that falls short: the measured figures that
explain it (CPU per unit of work against nginx's, the share of the box each got), written
from the round figures so the words always match the numbers."""

from __future__ import annotations

from case_figures import Round, median_of, median_ratio

# One router process under cProfile with a case's load at half the connections
# (bench/case_profile.py), rendered under the cases whatever case is rerun; update them
# with the code they describe.
PROFILES: dict[int, str] = {
    2: ("`perf record -a`, `strace -c` and `py-spy` on the router's processes under this "
        "load, 2026-11-26 01:30-02:10 UTC (load average 1 to 2): about 40% of their CPU is "
        "the kernel's and 60% user space. Per request the router makes the syscalls nginx "
        "makes (2 reads, a write to the client, one `writev` of head and body to the "
        "upstream; `epoll_wait` once per ~30 events), and on loopback each write also runs "
        "the receiver's side of TCP and wakes it: wrk or the upstream, which on two busy "
        "cores then preempts the router (0.9 involuntary context switches per request; "
        "nginx 0.36 switches per request in all). Measured one after the other from /proc, "
        "nginx spent 9 to 13 us of user and 26 to 34 us of kernel time per request, the "
        "router 57 to 78 and 44 to 59 (all of this before its fast path was compiled). "
        "The router's own Python per request, without sockets, was about 45 to 55 us "
        "(bench/fast_path_cpu.py, its own section): parsing both heads with httptools "
        "callbacks, planning both header sets, framing; no function over 5% of it, and "
        "rewrites of single functions moved nothing measurable. Since 2026-11-26 05:00 UTC "
        "the fast path's modules run compiled with mypyc (router/native.py): that part "
        "takes 0.66x (GET) and 0.72x (POST) of the time, and in this case the router "
        "spent 101 to 113 us per request in three runs of the same session, against 120 "
        "to 129 us before; its rate against nginx's was 47%, 56% and 49% (the round "
        "ratios 45% to 61%), against 43% to 46% before; a 5-round run at "
        "2026-11-26 08:17 UTC (the same code) 55%, its rounds 46% to 57%, p99 1.49x, and "
        "one at 10:44 UTC (a quieter box) 56%, its rounds 46% to 62%, p99 1.52x: at the "
        "target's edge, met by the median of a run and not by every run or round. The "
        "run above (23:52 UTC, the fast path opening its own origin connections since "
        "then, on a box about twice as fast: nginx spent 23 to 25 us per request where it "
        "spent 44 at 10:44) made 70%, every round 70% to 72%, p99 1.26x, the router 39 to "
        "40 us per request (107 at 10:44). What is left is mostly the kernel's (the "
        "writes on loopback) and the "
        "event loop's (`perf record -a`, 08:14 UTC: of the router's samples about 36% "
        "kernel, 36% libpython (the C API that compiled code calls, allocation, the "
        "collector's young generations: about 3%), 6% compiled fast path, 5% httptools, "
        "3% uvloop). The same router measured twice in one session differs by up to 20% "
        "in CPU per request."),
    4: ("What the router adds over the whole run is the run's start. wrk opens its 2,000 "
        "connections at once, and each first request needs a new origin connection too "
        "(the warm-up's were cut when its clients left, as nginx cuts them). Once the load "
        "is steady the router keeps up (the steady probe above), and the fast app's "
        "requests wait for at most a share of each wave of the slow app's work "
        "(router/turns.py). The burst is CPU: a new client connection costs the router "
        "about 4 times nginx's CPU and a new origin connection about 1.5 times "
        "(bench/connection_cpu.py, its own section, which also estimates what such a burst "
        "adds: about twice nginx's figure, and under 10 ms would take about 20 us a "
        "request, less than nginx needs). When the burst's requests reach the origin "
        "(`bench/case_profile.py arrivals`, 2 rounds, 2026-11-27 12:28 UTC; ms after wrk "
        "started, 1st / 1,000th / 2,000th request of the run): directly 62 to 64 / 73 to "
        "75 / 91 to 94; through nginx 64 to 72 / 114 to 120 / 136 to 138; through the "
        "router 80 / 134 to 143 / 176 to 244. The router passes the burst on at about half "
        "nginx's pace. Sampled every 20 to 40 ms from /proc (schedstat, scratch runs): "
        "through the burst the router's two processes ran 0.9 to 1.4 cores and waited for "
        "a core another 0.5 to 0.9, the origin ran about 0.5, and wrk, still opening "
        "connections and sending first requests, ran until 0.14 to 0.23 s into the run "
        "(through nginx, until about 0.15 s): the box is saturated, so the burst lasts as "
        "long as the router's CPU for it takes, and its last requests also wait for wrk to "
        "send them. "
        "`perf` on the router's processes in the burst's first 0.3 s (8 repeats): kernel "
        "50%, libpython 32% (the collector about 8% of all), uvloop "
        "6%, the compiled fast path 6%, httptools 3%. The router's extra CPU per connection "
        "is libpython and uvloop "
        "setting up and tearing down each transport (our protocol's own setup is about "
        "8 us), and the kernel work both proxies ask for costing it more (the wake-ups of "
        "a process that sleeps more; the system calls are the same ones: "
        "bench/connection_cpu.py). Taken off it so far: the addresses uvloop saved at "
        "accept instead of asking the socket again, no task for a client that leaves "
        "mid-request, no reference cycles left by lost connections (a full collection now "
        "runs once per process in the run's first 0.2 s, about 5 ms, freeing nothing; the "
        "collector's thresholds raised to 20,000 / 20 / 20 moved nothing measurable), "
        "and the connect timeout checked by the upstream client's sweep instead of an "
        "`asyncio.timeout` per connect (about 8 us a new origin connection). Tried and "
        "not kept (2026-11-27, 21:15 to 21:35 UTC, on a box about twice as fast as the "
        "earlier runs'): `TCP_DEFER_ACCEPT` on the listening sockets, so that a connection "
        "is accepted with its request already there (bench/connection_cpu.py, 2 rounds "
        "each: 26 and 28 us per new client connection with it, 28 and 30 us without, "
        "within the noise; wrk sends its request as soon as it connects); and each process "
        "accepting at most 16 connections per event-loop turn itself (its own reader on the "
        "listening socket and uvloop's `connect_accepted_socket`, where uvloop accepts "
        "every queued connection before reading any), so that the burst's first requests "
        "go on before the rest are accepted: the 1,000th request reached the origin 96 and "
        "104 ms after wrk's start, against 92 and 98 ms with uvloop's own accept "
        "(`bench/case_profile.py arrivals`, 2 rounds each). Not tried: "
        "accepting a few connections per turn from one shared queue, as nginx does, which "
        "would balance the two processes (in some runs one took its last connection 0.1 s "
        "after the other): only the burst's tail waits on the slower one, and both are "
        "busy until past its 1,000th request, where the whole-run p99 sits; keeping the "
        "warm-up's origin connections by reading "
        "the answers its clients abandoned (cutting the connection is how an origin learns "
        "its client left). nginx's own whole-run p99 added varies from round to round on "
        "this box, from about 1 to 62 ms in the runs of 2026-11-27 until 14:00 UTC, and "
        "from -0.5 to 29.9 ms in 5 rounds at 21:25 UTC (the router: 15.6 to 62.3, median "
        "30.1), from 17.0 to 40.1 ms in 3 rounds at 2026-11-28 02:00 UTC (the router 24.1 "
        "to 34.1), from 5.6 to 21.0 ms in 3 rounds at 17:40 UTC (the router 17.9 to 42.6, "
        "median 26.6; a quiet box, not written) and from 4.2 to 14.4 ms in the 3 rounds "
        "above (the router 17.9 to 37.2): the router's figure has not grown since "
        "2026-11-27 with the changes of 2026-11-28; the earlier "
        "measurements, and the changes they led to, are in this file's history."),
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
            "with the head in one write (router/fast_protocol.py, bodies up to 64 KiB, "
            "compiled with mypyc: router/native.py); its profile is under the cases.")


def idle_note(rows: list[Round]) -> str:
    return (f"p99 {median_of(rows, 'router', 'p99_ms'):.2f} ms against nginx's "
            f"{median_of(rows, 'nginx', 'p99_ms'):.2f} ms at the same 1,000 req/s; the "
            f"router's processes used {median_of(rows, 'router', 'cpu'):.0f}% of a core "
            f"against nginx's {median_of(rows, 'nginx', 'cpu'):.0f}%.")


def slow_note(rows: list[Round]) -> str:
    rate = median_ratio(rows, "router", "nginx", "rps")
    if rate >= 0.97:  # it kept up: what is left is the start of the run
        return (cpu_sentence(rows, "us_per_req", "us", "request") + " The router answered "
                f"{median_of(rows, 'router', 'rps'):,.0f} req/s ({rate:.0%} of nginx's "
                f"{median_of(rows, 'nginx', 'rps'):,.0f}): it kept up with the 2,000 clients, "
                "and once the load was steady it added "
                f"{median_of(rows, 'router', 'steady_added_ms'):.1f} ms at p99 over the "
                f"origin's (nginx {median_of(rows, 'nginx', 'steady_added_ms'):.1f} ms; the "
                "steady probe). What it adds over the whole run is the run's start: wrk "
                "opens its 2,000 connections at once, each first request needing a new "
                "origin connection too, and the router takes longer than nginx to accept and "
                "serve that burst: a new client connection and a new origin connection each "
                "cost it more CPU than they cost nginx (bench/connection_cpu.py, which "
                "measures both and estimates from them what such a burst adds); nginx added "
                f"{median_of(rows, 'nginx', 'added_p99_ms'):.0f} ms over the whole run "
                "itself. The fast app's requests share the processes' event loops with the "
                "slow app's, whose answers come back in waves (2,000 clients, one 200 ms "
                "origin); each app does at most a share of a turn's work (router/turns.py), "
                "so a fast request waits for a share of a wave, not the whole of it. Its "
                "p99 moved from "
                f"{median_of(rows, 'router', 'fast_alone_p99_ms'):.2f} to "
                f"{median_of(rows, 'router', 'fast_during_p99_ms'):.2f} ms through the "
                "router, from "
                f"{median_of(rows, 'nginx', 'fast_alone_p99_ms'):.2f} to "
                f"{median_of(rows, 'nginx', 'fast_during_p99_ms'):.2f} ms through nginx, on "
                "the same box.")
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
