"""The five cases of bench/proxy_cases.py: each checks its targets answer correctly, loads
them in interleaved rounds and returns a :class:`case_figures.CaseResult`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from case_figures import CaseResult, Check, Column, Round, median_of, median_ratio
from case_measure import WARMUP, Background, client, proxies, run_client, with_cpu, wrk
from case_notes import PROFILES, big_note, idle_note, post_note, slow_note, ws_note
from case_origins import digest_answer
from case_targets import (
    BIG,
    KEEP_ALIVE,
    PROXY,
    UPSTREAM,
    Bed,
    Target,
    extra_router_env,
    nginx_text,
    origin_target,
    rss_kb,
    start_nginx_proxy,
    start_router,
)
from proxy_bench import BODY, router_env

from ops.cluster.processes import Processes

BIG_CONNECTIONS = 16
POST_CONNECTIONS = 64
IDLE_CONNECTIONS, IDLE_RATE = 10_000, 1_000
SLOW_CONNECTIONS, SLOW_DELAY = 2_000, 0.2
FAST_CONNECTIONS, FAST_RATE = 16, 200
# Case 4's steady probe: from this second of the slow load on, past the start's burst of
# 2,000 new connections, this many GET/s over this many connections to the slow app.
STEADY_FROM, STEADY_CONNECTIONS, STEADY_RATE = 3, 64, 200
WS_CONNECTIONS = 1_000


def slow_load(port: int, host: str) -> list[str]:
    """wrk's arguments for case 4's load on ``port`` (with ``-d``; wrk itself first)."""
    return ["-t2", f"-c{SLOW_CONNECTIONS}", "--latency", "--timeout", "10s", "-H",
            f"Host: {host}", f"http://127.0.0.1:{port}/"]


def fetch(target: Target | int, slug: str, path: str = "/", method: str = "GET",
          body: bytes | None = None) -> tuple[int, bytes]:
    import http.client

    port = target if isinstance(target, int) else target.port
    host = f"{slug}.apps.localhost:{port}"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {"Host": host}
        if body is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def expect(target: Target | int, slug: str, path: str, want: bytes, method: str = "GET",
           body: bytes | None = None) -> None:
    status, got = fetch(target, slug, path, method, body)
    if status != 200 or got != want:
        name = target if isinstance(target, int) else target.label
        raise RuntimeError(f"{name}: {method} {slug}{path} answered {status} with "
                           f"{len(got)} bytes, not the expected {len(want)}: {got[:120]!r}")


def wrk_errors(sample: object, key: str, notes: list[str]) -> None:
    errors = getattr(sample, "errors", "")
    if errors:
        notes.append(f"wrk reported for `{key}`: {errors}.")


def router_env_line(processes: int | str = "<cores>") -> str:
    env = {**router_env(0, Path("<SQLite file>"), "redis://127.0.0.1:<port>/0", 0),
           "SVCSRV_BIND_PORT": "<port>", "SVCSRV_APPS_PORT": "<port>",
           "SVCSRV_PROCESSES": str(processes), **extra_router_env()}
    return " ".join(f"{k}={v}" for k, v in env.items() if not k.endswith(
        ("BASE_URL", "PORTAL_URL", "CONSOLE_URL", "DOCS_URL")))


def shared_configuration() -> str:
    """The profiles and the configuration every case runs with, rendered once under the
    cases."""
    blocks = [
        ("nginx, the upstream (1 worker) and the proxy (`worker_processes` = the cores)",
         "nginx", nginx_text("<prefix>", "    ...\n", "<1 or cores>",
                             open_files="<RLIMIT_NOFILE>")),
        ("nginx proxy `http` body", "nginx", PROXY.format(
            port="<port>", upstream_port="<upstream>", slow_port="<slow origin>",
            ws_port="<ws origin>", forward="(X-Forwarded-* as bench/proxy_bench.py)")),
        ("upstream `http` body", "nginx", UPSTREAM.format(
            port="<upstream>", big="<1 MiB file>", payload="<1,024 bytes>")),
        ("router: `router.cli.serve(load_settings())`, its fast path compiled with mypyc "
         "by scripts/install.sh (router/native.py; in every case's runs from 2026-11-26 "
         "05:00 UTC on), after seeding the apps bench and fast "
         "(-> upstream), slow (-> slow origin), ws (-> echo origin), with base, portal, "
         "console and docs URLs `http://<name>.localhost:<port>`", "sh", router_env_line()),
    ]
    lines = []
    if PROFILES:
        lines += ["### Where one router process spends its CPU", ""]
        lines += [f"- Case {case}: {text}" for case, text in sorted(PROFILES.items())]
        lines += [""]
    lines += ["### Configuration of every case", ""]
    for label, lang, text in blocks:
        lines += [f"{label}:", "", f"```{lang}", text.rstrip(), "```", ""]
    return "\n".join(lines)


def config_blocks(nginx_part: str, processes: int) -> list[tuple[str, str, str]]:
    """What this case ran with, kept with its figures (the whole of it is rendered once,
    under the cases, from the code of the latest run)."""
    return [("router environment", "sh", router_env_line(processes)),
            ("nginx, for this case", "text", nginx_part)]


def case_result(case: int, title: str, run: str, load: str, targets: dict[str, str],
                columns: list[Column], rounds: list[Round], checks: list[Check],
                notes: list[str], nginx_part: str, processes: int) -> CaseResult:
    return CaseResult(case, title, run, load, targets, columns, rounds, checks,
                      config_blocks(nginx_part, processes), notes)


def plural(rounds: int) -> str:
    return f"{rounds} round{'' if rounds == 1 else 's'}"


# --------------------------------------------------------------------------- case 1


def case_big(place: Bed, rounds: int, duration: int, run: str) -> CaseResult:
    notes: list[str] = []
    rows: list[Round] = []
    with proxies(place) as targets:
        for target in targets:
            expect(target, "bench", "/1m", BIG)
        for _ in range(rounds):
            row: Round = {}
            for t in targets:
                argv = ["-t1", f"-c{BIG_CONNECTIONS}", "--latency", "-H",
                        f"Host: {t.host('bench')}", f"http://127.0.0.1:{t.port}/1m"]
                wrk([f"-d{WARMUP}s", *argv], WARMUP)
                sample, cpu = with_cpu({"proxy": t.proc.pid, "upstream": place.upstream.pid},
                                       lambda a=argv: wrk([f"-d{duration}s", *a], duration))
                wrk_errors(sample, t.key, notes)
                mb_s = sample.rps * sample.bytes_per_request / 1e6
                row[t.key] = {"mb_s": mb_s, "p99_ms": sample.p99_ms, "cpu": cpu["proxy"],
                              "ms_per_mb": 10 * cpu["proxy"] / mb_s,
                              "upstream_cpu": cpu["upstream"]}
                expect(t, "bench", "/1m", BIG)
                print(f"case 1 {t.key}: {row[t.key]}", file=sys.stderr, flush=True)
            rows.append(row)
    share = median_ratio(rows, "router", "nginx", "mb_s")
    cost = median_ratio(rows, "router", "nginx", "ms_per_mb")
    if share < 0.5:
        notes.append(big_note(rows))
    return case_result(
        1, "1 MiB answer", run,
        f"`wrk -t1 -c{BIG_CONNECTIONS} -d{duration}s --latency` on `GET /1m` (a 1,048,576-byte "
        f"file from the upstream), after a {WARMUP} s warm-up per target; {plural(rounds)}, "
        "nginx then router. MB = 10^6 bytes read by wrk (heads included); CPU per MB is the "
        "proxy processes' CPU time (from /proc) over the MB they relayed.",
        {"nginx": "nginx proxy", "router": "router"},
        [Column("mb_s", "MB/s", ",.0f"), Column("p99_ms", "p99", ".1f", " ms"),
         Column("cpu", "proxy CPU", ".0f", "%"), Column("ms_per_mb", "CPU/MB", ".2f", " ms"),
         Column("upstream_cpu", "upstream CPU", ".0f", "%")],
        rows, [Check("router MB/s vs nginx's", f"{share:.0%}", ">= 50%", share >= 0.5),
               Check("router CPU per MB vs nginx's", f"{cost:.2f}x", "", True)], notes,
        f"worker_processes {place.processes}; proxy_pass to the upstream (keepalive 512); "
        "proxy_buffering on with the default proxy_buffers (8 x 4 KB)", place.processes)


# --------------------------------------------------------------------------- case 2

def post_body() -> bytes:
    """16,384 bytes of JSON (whitespace padded to the size)."""
    items = []
    while True:
        items.append({"id": len(items), "name": f"item-{len(items):05d}", "qty": len(items) % 7})
        text = json.dumps({"items": items}).encode()
        if len(text) > 16384 - 60:
            return text + b" " * (16384 - len(text))


def lua_script(body: bytes) -> str:
    return ("wrk.method = \"POST\"\n"
            "wrk.headers[\"Content-Type\"] = \"application/json\"\n"
            f"wrk.body = [==[{body.decode()}]==]\n")


def case_post(place: Bed, rounds: int, duration: int, run: str) -> CaseResult:
    body = post_body()
    assert len(body) == 16384
    script = place.tmp / "post.lua"
    script.write_text(lua_script(body))
    notes: list[str] = []
    rows: list[Round] = []
    with proxies(place) as targets:
        for target in targets:
            expect(target, "bench", "/post", BODY, "POST", body)
            # The slow origin's /digest shows the body arrived byte for byte.
            expect(target, "slow", "/digest", digest_answer(body), "POST", body)
        for _ in range(rounds):
            row: Round = {}
            for t in targets:
                argv = ["-t1", f"-c{POST_CONNECTIONS}", "--latency", "-s", str(script), "-H",
                        f"Host: {t.host('bench')}", f"http://127.0.0.1:{t.port}/post"]
                wrk([f"-d{WARMUP}s", *argv], WARMUP)
                sample, cpu = with_cpu({"proxy": t.proc.pid},
                                       lambda a=argv: wrk([f"-d{duration}s", *a], duration))
                wrk_errors(sample, t.key, notes)
                row[t.key] = {"rps": sample.rps, "p50_ms": sample.p50_ms,
                              "p99_ms": sample.p99_ms, "cpu": cpu["proxy"],
                              "us_per_req": 1e4 * cpu["proxy"] / sample.rps}
                expect(t, "bench", "/post", BODY, "POST", body)
                print(f"case 2 {t.key}: {row[t.key]}", file=sys.stderr, flush=True)
            rows.append(row)
    rate = median_ratio(rows, "router", "nginx", "rps")
    p99 = median_ratio(rows, "router", "nginx", "p99_ms")
    if not (rate >= 0.5 and p99 <= 2.0):
        notes.append(post_note(rows))
    return case_result(
        2, "POST, 16 KB JSON body, 1 KB answer", run,
        f"`wrk -t1 -c{POST_CONNECTIONS} -d{duration}s --latency -s post.lua` on `POST /post` "
        "(the script sets the method, `Content-Type: application/json` and a 16,384-byte "
        f"JSON body; the upstream answers 1,024 bytes), after a {WARMUP} s warm-up; "
        f"{plural(rounds)}. Checked first: the 1 KB answer, and the body reaching an origin "
        "byte for byte (its length and SHA-256, echoed by the slow origin's `/digest`).",
        {"nginx": "nginx proxy", "router": "router"},
        [Column("rps", "req/s", ",.0f"), Column("p50_ms", "p50", ".2f", " ms"),
         Column("p99_ms", "p99", ".2f", " ms"), Column("cpu", "proxy CPU", ".0f", "%"),
         Column("us_per_req", "CPU/req", ".0f", " us")],
        rows, [Check("router req/s vs nginx's", f"{rate:.0%}", ">= 50%", rate >= 0.5),
               Check("router p99 vs nginx's", f"{p99:.2f}x", "<= 2x", p99 <= 2.0)], notes,
        f"worker_processes {place.processes}; client_body_buffer_size 64k; proxy_pass to the "
        "upstream (keepalive 512), request buffering on (the default)", place.processes)


# --------------------------------------------------------------------------- case 3


def idle_round(place: Bed, start: str, duration: int) -> dict[str, float]:
    """A freshly started target: RSS, 10,000 connections opened and each used once, RSS
    again, then 1,000 req/s over them for ``duration`` s."""
    procs = Processes()
    try:
        target = (start_nginx_proxy if start == "nginx" else start_router)(place, procs)
        time.sleep(1)
        before = rss_kb(target.proc.pid)
        argv = client("paced", target.port, target.host("bench"), "--connections",
                      str(IDLE_CONNECTIONS), "--rate", str(IDLE_RATE), "--duration",
                      str(duration), "--hold")
        with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=place.python_env) as gen:
            assert gen.stdin is not None and gen.stdout is not None
            line = gen.stdout.readline()
            if line.strip() != "primed":
                raise RuntimeError(f"paced client: {line!r}")
            time.sleep(1)
            held = rss_kb(target.proc.pid)
            stdin, stdout = gen.stdin, gen.stdout

            def timed_load() -> dict[str, float]:
                stdin.write("go\n")
                stdin.flush()
                answer: dict[str, float] = json.loads(stdout.read().strip().splitlines()[-1])
                return answer

            result, cpu = with_cpu({"proxy": target.proc.pid}, timed_load)
        result["cpu"] = cpu["proxy"]
        result["rss_before_mb"] = before / 1024
        result["kb_per_conn"] = (held - before) / IDLE_CONNECTIONS
        expect(target, "bench", "/", BODY)
        return result
    finally:
        procs.stop_all()


def case_idle(place: Bed, rounds: int, duration: int, run: str) -> CaseResult:
    notes: list[str] = []
    rows: list[Round] = []
    for _ in range(rounds):
        row: Round = {}
        for key in ("nginx", "router"):
            row[key] = idle_round(place, key, duration)
            print(f"case 3 {key}: {row[key]}", file=sys.stderr, flush=True)
            if row[key]["errors"] or row[key]["closed_by_server"]:
                notes.append(f"`{key}`: {row[key]['errors']:.0f} failed requests, "
                             f"{row[key]['closed_by_server']:.0f} connections closed by it.")
        rows.append(row)
    p99 = median_ratio(rows, "router", "nginx", "p99_ms")
    memory = median_of(rows, "router", "kb_per_conn")
    if not (p99 <= 2.0 and memory < 20):
        notes.append(idle_note(rows))
    return case_result(
        3, "10,000 mostly idle keep-alive connections, 1,000 req/s", run,
        f"bench/case_clients.py `paced`: {IDLE_CONNECTIONS:,} keep-alive connections opened "
        f"200 at a time, one GET on each (1 KB answer, checked), then {IDLE_RATE:,} GET/s for "
        f"{duration} s spread round-robin over them (each connection used about every "
        f"{IDLE_CONNECTIONS / IDLE_RATE:.0f} s); latency counted from when a request was due. "
        "Each target is started afresh for each round. Memory: the RSS of the proxy's "
        "processes (from /proc: nginx's master and workers; the router's supervisor and "
        f"processes) with the {IDLE_CONNECTIONS:,} connections open and idle, minus before "
        f"they were opened, over {IDLE_CONNECTIONS:,}. Both keep idle connections "
        f"{KEEP_ALIVE} s: nginx's default `keepalive_timeout`, and "
        f"`SVCSRV_KEEP_ALIVE_TIMEOUT={KEEP_ALIVE}` for the router (whose default, uvicorn's, "
        "is 5 s: it would close each connection between two of its requests).",
        {"nginx": "nginx proxy", "router": "router"},
        [Column("rate", "answered/s", ",.0f"), Column("p50_ms", "p50", ".2f", " ms"),
         Column("p99_ms", "p99", ".2f", " ms"), Column("max_ms", "max", ".1f", " ms"),
         Column("rss_before_mb", "RSS before", ".0f", " MB"),
         Column("kb_per_conn", "RSS/connection", ".1f", " KB"),
         Column("cpu", "proxy CPU", ".0f", "%"), Column("errors", "errors", ".0f")],
        rows, [Check("router p99 vs nginx's", f"{p99:.2f}x", "<= 2x", p99 <= 2.0),
               Check("router RSS per idle connection", f"{memory:.1f} KB", "< 20 KB",
                     memory < 20)], notes,
        f"worker_processes {place.processes}; worker_rlimit_nofile and worker_connections "
        f"from RLIMIT_NOFILE; keepalive_timeout {KEEP_ALIVE}s; keepalive_requests 1000000",
        place.processes)


# --------------------------------------------------------------------------- case 4


def fast_client(t: Target, duration: int) -> list[str]:
    return client("paced", t.port, t.host("fast"), "--connections", str(FAST_CONNECTIONS),
                  "--rate", str(FAST_RATE), "--duration", str(duration))


def steady_probe(t: Target, duration: int) -> dict[str, float]:
    """The slow app's latency once the load is steady: ``paced`` from STEADY_FROM s into
    a load of ``duration + 2`` s, ending a second or so before it."""
    time.sleep(STEADY_FROM)
    seconds = duration - STEADY_FROM
    return run_client(client("paced", t.port, t.host("slow"), "--connections",
                             str(STEADY_CONNECTIONS), "--rate", str(STEADY_RATE),
                             "--duration", str(seconds)), seconds + 60)


def case_slow(place: Bed, rounds: int, duration: int, run: str) -> CaseResult:
    notes: list[str] = []
    rows: list[Round] = []
    with proxies(place) as proxied:
        for t in proxied:
            expect(t, "slow", "/", BODY)
            expect(t, "fast", "/", BODY)
        origin = origin_target("origin", "slow origin, directly", place.slow, place.slow_port)
        expect(place.slow_port, "slow", "/", BODY)
        targets = [origin, *proxied]
        for _ in range(rounds):
            row: Round = {}
            for t in targets:
                argv = slow_load(t.port, t.host("slow"))
                wrk([f"-d{WARMUP}s", *argv], WARMUP)
                alone: dict[str, float] = {}
                during: dict[str, float] = {}
                if t.key != "origin":
                    alone = run_client(fast_client(t, duration), duration + 60)
                    fast = Background(lambda t=t: run_client(fast_client(t, duration),
                                                             duration + 60))
                    fast.start()
                steady = Background(lambda t=t: steady_probe(t, duration))
                steady.start()
                sample, cpu = with_cpu({"proxy": t.proc.pid, "origin": place.slow.pid},
                                       lambda a=argv: wrk([f"-d{duration + 2}s", *a],
                                                          duration + 2))
                if t.key != "origin":
                    during = fast.value()
                probed = steady.value()
                if probed["errors"]:
                    notes.append(f"{t.key}: the steady probe saw {probed['errors']:.0f} "
                                 "errors")
                wrk_errors(sample, t.key, notes)
                row[t.key] = {"rps": sample.rps, "p50_ms": sample.p50_ms,
                              "p99_ms": sample.p99_ms, "cpu": cpu["proxy"],
                              "us_per_req": 1e4 * cpu["proxy"] / sample.rps,
                              "origin_cpu": cpu["origin"],
                              "fast_alone_p99_ms": alone.get("p99_ms", 0.0),
                              "fast_during_p99_ms": during.get("p99_ms", 0.0),
                              "steady_p99_ms": probed["p99_ms"]}
                print(f"case 4 {t.key}: {row[t.key]}", file=sys.stderr, flush=True)
            for key in ("origin", "nginx", "router"):
                row[key]["added_p99_ms"] = row[key]["p99_ms"] - row["origin"]["p99_ms"]
                row[key]["steady_added_ms"] = (row[key]["steady_p99_ms"]
                                               - row["origin"]["steady_p99_ms"])
                row[key]["fast_added_ms"] = (row[key]["fast_during_p99_ms"]
                                             - row[key]["fast_alone_p99_ms"])
            rows.append(row)
    added = median_of(rows, "router", "added_p99_ms")
    steady_added = median_of(rows, "router", "steady_added_ms")
    fast_added = median_of(rows, "router", "fast_added_ms")
    if not (added < 10 and steady_added < 10 and fast_added < 10):
        notes.append(slow_note(rows))
    return case_result(
        4, "slow origin (200 ms) under 2,000 concurrent requests", run,
        f"`wrk -t2 -c{SLOW_CONNECTIONS} -d{duration + 2}s --latency --timeout 10s` on the slow "
        f"origin's app (every answer {SLOW_DELAY * 1e3:.0f} ms after its request, 1 KB), "
        f"after a {WARMUP} s warm-up; the same load on the origin directly gives its own p99. "
        f"Meanwhile, from its 1st second, bench/case_clients.py `paced` sends {FAST_RATE} "
        f"GET/s over {FAST_CONNECTIONS} connections for {duration} s to the `fast` app (the "
        "1 KB upstream) through the same proxy; the same client alone, just before, gives "
        "the fast app's p99 without the slow load. And from "
        f"{STEADY_FROM} s into the load, past its start (wrk opens its 2,000 connections at "
        f"once), a second `paced` client sends {STEADY_RATE} GET/s over "
        f"{STEADY_CONNECTIONS} connections of its own to the slow app for "
        f"{duration - STEADY_FROM} s: the steady p99. {plural(rounds)}, origin, nginx, "
        "router. Added p99 is a proxy's p99 minus the origin's in the same round, for the "
        "whole run (wrk's) and for the steady probe.",
        {"origin": "slow origin, directly", "nginx": "nginx proxy", "router": "router"},
        [Column("rps", "req/s", ",.0f"), Column("p50_ms", "p50", ".1f", " ms"),
         Column("p99_ms", "p99", ".1f", " ms"), Column("added_p99_ms", "added p99", ".1f",
                                                        " ms"),
         Column("steady_p99_ms", "steady p99", ".1f", " ms"),
         Column("steady_added_ms", "steady added p99", ".1f", " ms"),
         Column("cpu", "proxy CPU", ".0f", "%"), Column("us_per_req", "CPU/req", ".0f", " us"),
         Column("origin_cpu", "origin CPU", ".0f", "%"),
         Column("fast_alone_p99_ms", "fast app p99 alone", ".2f", " ms"),
         Column("fast_during_p99_ms", "fast app p99 during", ".2f", " ms")],
        rows, [Check("router p99 added over the origin's, whole run (its start included)",
                     f"{added:.1f} ms", "< 10 ms", added < 10),
               Check("router p99 added over the origin's, steady (the probe)",
                     f"{steady_added:.1f} ms", "< 10 ms", steady_added < 10),
               Check("fast app's p99 during the slow load minus alone, through the router",
                     f"{fast_added:+.2f} ms", "unchanged: within 10 ms", fast_added < 10)],
        notes, f"worker_processes {place.processes}; slow.apps.localhost -> the slow origin "
        "(keepalive 512 per worker, as the router's 512 idle per process); "
        "fast.apps.localhost -> the upstream", place.processes)


# --------------------------------------------------------------------------- case 5


def case_ws(place: Bed, rounds: int, duration: int, run: str) -> CaseResult:
    notes: list[str] = []
    rows: list[Round] = []
    with proxies(place) as proxied:
        origin = origin_target("origin", "echo origin, directly", place.ws, place.ws_port)
        targets = [origin, *proxied]
        for t in targets:  # handshake and every echo checked, on a few connections
            check = run_client(client("ws", t.port, t.host("ws"), "--connections", "4",
                                      "--duration", "1"), 60)
            if check["errors"] or not check["messages"]:
                raise RuntimeError(f"{t.label}: websocket echo check failed: {check}")
        for _ in range(rounds):
            row: Round = {}
            for t in targets:
                argv = client("ws", t.port, t.host("ws"), "--connections",
                              str(WS_CONNECTIONS), "--duration", str(duration))
                result, cpu = with_cpu({"proxy": t.proc.pid, "origin": place.ws.pid},
                                       lambda a=argv: run_client(a, duration + 120))
                if result["errors"]:
                    raise RuntimeError(f"{t.label}: {result}")
                row[t.key] = {"messages_per_s": result["messages_per_s"],
                              "cpu": cpu["proxy"] if t.key != "origin" else 0.0,
                              "origin_cpu": cpu["origin"]}
                row[t.key]["us_per_message"] = (1e4 * row[t.key]["cpu"]
                                                / result["messages_per_s"])
                print(f"case 5 {t.key}: {row[t.key]}", file=sys.stderr, flush=True)
            rows.append(row)
    share = median_ratio(rows, "router", "nginx", "messages_per_s")
    if share < 0.4:
        notes.append(ws_note(rows))
    return case_result(
        5, "WebSocket, 1,000 connections echoing 100-byte messages", run,
        f"bench/case_clients.py `ws`: {WS_CONNECTIONS:,} WebSocket connections (handshake "
        "checked), each sending a 100-byte binary message, awaiting its echo (checked byte "
        f"for byte; each connection's message is its own) and sending the next, for a 1 s "
        f"warm-up then {duration} s; messages/s counts echoes. The origin is the "
        "`websockets` library's echo (no compression, no pings). The origin directly gives "
        f"the ceiling of the client and origin on this box. {plural(rounds)}, origin, nginx, "
        "router.",
        {"origin": "echo origin, directly", "nginx": "nginx proxy", "router": "router"},
        [Column("messages_per_s", "messages/s", ",.0f"), Column("cpu", "proxy CPU", ".0f", "%"),
         Column("us_per_message", "proxy CPU/message", ".0f", " us"),
         Column("origin_cpu", "origin CPU", ".0f", "%")],
        rows, [Check("router messages/s vs nginx's", f"{share:.0%}", ">= 40%", share >= 0.4)],
        notes, f"worker_processes {place.processes}; ws.apps.localhost -> the echo origin with "
        "proxy_http_version 1.1, Upgrade $http_upgrade, Connection \"upgrade\", "
        "proxy_read_timeout 1h", place.processes)


CASES = {1: case_big, 2: case_post, 3: case_idle, 4: case_slow, 5: case_ws}


def intro() -> str:
    return (
        "Issue 18's cases beyond the small GET of \"Runtime proxy vs nginx\" "
        "(bench/proxy_bench.py): each case runs nginx as "
        "a reverse proxy (`worker_processes` = the cores) and the router (`svc-server serve`, "
        "`SVCSRV_PROCESSES` = the cores) in front of the same origins, all on 127.0.0.1 "
        "(bench/case_targets.py), checks each answers correctly before its load, and "
        "interleaves them for some rounds. Figures are the median of rounds; ratios are the "
        "median of each round's ratio (a round runs the targets back to back, so its ratios "
        "share the shared box's conditions). CPU is % of one core over the measured window, "
        "summed over a target's processes (from /proc). Each case's latest run is kept in "
        "bench/proxy_cases.json and rendered here with its own date, machine and load "
        "average; rerun one with `.venv/bin/python bench/proxy_cases.py --case N`."
    )

