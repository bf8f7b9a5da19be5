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
    4: ("Until 2026-11-26, a fast-path request still waiting 0.25 s for its answer got a "
        "task watching its client (the upstream client's sweep); once the router fell "
        "behind under this load most requests did, and its CPU per request rose from "
        "about 110 us (a round that kept up) to about 180 us (rounds that did not), which "
        "kept it behind. The fast path's exchanges are now cut by their protocol's "
        "`connection_lost`, with no task: 159 us per request and 7,000 to 7,400 req/s, "
        "against 178 us and 6,500 req/s in the session's runs before; compiled with mypyc "
        "(router/native.py, 05:21 UTC), 110 to 132 us and 8,000 to 8,700 req/s, the p99 "
        "added about 220 to 300 ms instead of about 600; on a quiet box (the rounds above, "
        "load average 0.08 at their start) 124 to 136 us, 7,700 to 8,300 req/s and 189 to "
        "418 ms. Sampled each second of one router run there: 10 to 20% of one core idle "
        "in the whole box, each router process given 50 to 55% of a core, the origin 45%, "
        "wrk 30%; `perf` on one process: kernel 47%, libpython 32% (the C API compiled code "
        "calls, allocation, the collector about 4%), compiled fast path 8%, httptools 5%, "
        "uvloop 5%; `strace -c`: 2 reads and 2 writes per request, and each `epoll_wait` "
        "returning about 280 events (event-loop turns of tens of ms, which every request "
        "behind them waits out, the fast app's too). "
        "It is still CPU-bound: 2,000 clients ask for 10,000 req/s, which at 110 to 160 us "
        "per request needs 1.1 to 1.6 of the box's 2 cores, shared with wrk (2 threads) and "
        "the origin (35 to 40% of a core). Every request stayed on the fast path (`py-spy`: "
        "no ASGI cycle, no task); the writes to the client and to the origin are 45% of the "
        "processes' samples. The p99 also holds the start of each run: wrk opens its 2,000 "
        "connections at once and `bench/case_profile.py accept router` shows up to about "
        "700 waiting in one process's accept queue 0.3 s in, drained after about 1.3 s. "
        "nginx itself added 35 to 133 ms at p99 in the same rounds: the 10 ms target is "
        "not met by nginx on this box either. Rechecked 2026-11-26 16:25-17:00 UTC (`perf stat`"
        " on the proxies' processes over 4 s of this load): the router makes the syscalls nginx"
        " makes, 2 reads and 2 writes per request (nginx: `recvfrom` and `writev`), with fewer "
        "`epoll_wait` calls (5,040 against 12,281: longer turns) and 2.4 times nginx's context "
        "switches (23,863 against 10,114, almost all involuntary: preempted while busy). Run "
        "for 30 s instead of 10 (one round): the router's p99 280 ms against the origin's 215 "
        "(65 ms added; p50 14 ms; 8,956 against 9,749 req/s), nginx's 221 (6 ms added). Most of"
        " the p99 added above is the start of each run, 2,000 connections opened at once, and a"
        " new connection costs the router about 3 times nginx's CPU (bench/connection_cpu.py, "
        "its own section); the rest is steady queueing behind the CPU. The collector's "
        "thresholds raised (50,000 / 20 / 100, three rounds each way) moved CPU per request "
        "within the noise: it is about 2.5% of the router's samples. 2026-11-26 23:00 to"
        " 23:55 UTC, on a box about twice as fast (the origin's CPU per request 18 to 20 us "
        "against 31 to 35 above): the router kept up (about 9,500 req/s against nginx's "
        "9,600, 50 to 58 us per request), and a 30 s run added 1.3 ms at p99 over the "
        "origin's (nginx 1.2). The steady probe, part of this case since then, shows the "
        "same in every round. What the router adds over the whole run is its first second: "
        "wrk opens its 2,000 connections at once, and each first request needs a new "
        "origin connection too (the warm-up's were cut when its clients left). One wave "
        "of 2,000 new connections, a GET each (an ad-hoc client, two rounds): the router's "
        "last answer 80 to 100 ms after nginx's. A request finding no idle origin "
        "connection then became a request cycle that opened one: 120 us of the router's "
        "CPU (pool size 0, keep-alive clients) against 32 on a pooled connection; it now "
        "opens it from the fast path (router/fast_exchange.py): 92 to 96 us. A new client "
        "connection still costs the router about 4 times nginx's CPU "
        "(bench/connection_cpu.py), and the kernel spreads new connections over the "
        "processes' own accept queues (SO_REUSEPORT, router/processes.py): 0.28 s in, one "
        "process can still hold 170 to 180 while the other's is empty (`bench/case_profile.py"
        " accept router`). One shared queue would let the idle process take them, but "
        "libuv accepts a whole burst into whichever process wakes first, which is why each "
        "has its own. 2026-11-27: a new client connection now takes its addresses from "
        "what uvloop saved at accept (about 10 us less), a client leaving mid-request no "
        "longer becomes a task, and lost connections leave no reference cycles (the end of "
        "the warm-up, 2,000 clients leaving at once, had left about 27,000 objects per "
        "process for a full collection during the next run's start). Three runs of this "
        "case that morning, 9 rounds: the router added 27 to 172 ms at p99 over the whole "
        "run (median 37; the session before, 68 to 92), nginx 2 to 45 (median 28); the "
        "fast app's p99 rose 5.0 to 28.7 ms through the router (median 11.7), 2.3 to 7.6 "
        "through nginx (median 5.2). A new origin connection costs the router about 1.5 to "
        "2 times nginx's CPU, a new client connection about 4 times "
        "(bench/connection_cpu.py). Traced request by request (each fast request's send "
        "time and latency, one round each), the fast app's slow requests came in bursts: "
        "in the run's first 0.7 s (the 2,000 new connections, then the first waves of "
        "answers, up to 100 ms) and now and then later (20 to 35 ms, with both router "
        "processes stalled at once, as when the steady probe's client starts at 3 s), "
        "behind whole waves of the slow app's requests, which the loop read in one turn "
        "and served before anything else. Since then each app does at most 32 pieces of "
        "work per turn (router/turns.py): in two rounds each before and after the change, "
        "the fast app's p99 rose +8.0 and +37.4 ms, then +3.5 and +3.4 ms; in the "
        "section's run after it, +5.7 to +6.6 ms (nginx +3.8 to +9.5), with the CPU per "
        "request unchanged."),
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
