"""The router's own CPU per proxied request, without sockets: a steadier figure to compare
two versions of the fast path by than a load test's.

    .venv/bin/python bench/fast_path_cpu.py [--requests 100000] [--rounds 5] [--post]
    .venv/bin/python bench/fast_path_cpu.py [--count] [--post]
    .venv/bin/python bench/fast_path_cpu.py --against REV [--rounds 5] [--dry-run]

On this shared 2-core box, the same router measured twice under wrk differs by up to 20%
in CPU per request (bench/proxy_cases.py; docs/BENCHMARKS.md), more than most changes to
its Python code can gain. Here one process runs the service (dev settings, SQLite, one
seeded app) and feeds its HTTP protocol (``router/fast_protocol.py``) requests straight
from memory: a request goes in by ``data_received`` as uvloop would deliver it, leaves
for the origin on a pooled origin connection whose transport keeps what is written, the
origin's answer comes back by that connection's ``data_received``, and the client's
transport receives the answer, which is checked. No syscall, no other process: what is
timed (``time.process_time``) is the Python of the fast path alone, both ways, and the
C it calls (httptools). Prints us per request for each round and their median. The
kernel's share (the reads and writes this leaves out) is in the load benchmarks' figures.

``--count`` counts Python bytecodes and calls per request instead (the same on every run).
``--against REV`` compares this tree's router with git revision REV's (checked out in a
temporary worktree; this harness drives both): counts, then timed rounds alternating
between the two, and writes both into docs/BENCHMARKS.md with the ratio of each round.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop
from uvicorn.server import ServerState

ROOT = Path(__file__).resolve().parent.parent
SLUG = "bench"
ORIGIN = "http://127.0.0.1:9"  # never connected to: the pooled connection is in memory
BODY = b"x" * 1024
ANSWER = (b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Thu, 26 Nov 2026 02:00:00 GMT\r\n"
          b"Content-Type: text/plain\r\nContent-Length: 1024\r\nConnection: keep-alive\r\n\r\n"
          + BODY)


def request(post: bool, port: int) -> bytes:
    host = b"Host: %b.apps.localhost:%d\r\n" % (SLUG.encode(), port)
    if not post:
        return b"GET / HTTP/1.1\r\n" + host + b"\r\n"
    body = json.dumps({"data": "y" * (16 * 1024 - 12)}).encode()
    return (b"POST /post HTTP/1.1\r\n" + host + b"Content-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body)


class Transport:
    """What the protocols need of a uvloop transport; keeps what is written."""

    def __init__(self, peer: tuple[str, int]) -> None:
        self.written: list[bytes] = []
        self._peer = peer
        self.closing = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def writelines(self, data: Any) -> None:
        self.written.extend(data)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": self._peer, "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def set_protocol(self, protocol: Any) -> None: ...


def counted(one: Any, times: int) -> tuple[float, float]:
    """Python bytecodes executed, and functions called (Python and C), per ``one()``:
    the same on every run, unlike its time on this box."""
    opcodes = calls = 0

    def trace(frame: Any, event: str, _arg: Any) -> Any:
        nonlocal opcodes
        frame.f_trace_opcodes = True
        if event == "opcode":
            opcodes += 1
        return trace

    def profile(_frame: Any, event: str, _arg: Any) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.settrace(trace)
    sys.setprofile(profile)
    try:
        for _ in range(times):
            one()
    finally:
        sys.settrace(None)
        sys.setprofile(None)
    return opcodes / times, calls / times


async def measure(requests: int, rounds: int, post: bool, count: bool = False) -> list[float]:
    from payments.db import make_engine
    from router.app import create_app
    from router.cli import server_config
    from router.fast_protocol import FastProtocol, http_protocol
    from router.origin import parse_origin
    from router.origin_connection import OriginConnection
    from router.settings import load_settings

    sys.path.insert(0, str(ROOT / "bench"))
    from proxy_bench import _seed

    tmp = Path(tempfile.mkdtemp(prefix="fast-path-cpu-"))
    port = 8000
    base = f"localhost:{port}"
    settings = load_settings(
        mode="dev", database_url=f"sqlite:///{tmp / 'router.db'}", bind_port=port,
        apps_port=port, base_url=f"http://api.{base}", portal_url=f"http://portal.{base}",
        console_url=f"http://console.{base}", docs_url=f"http://docs.{base}",
        chain_workers=False, webhook_workers=False)
    make_engine(settings.database_url).dispose()
    _seed(settings.database_url, ORIGIN)
    app = create_app(settings)
    config = server_config(app, settings)  # as `svc-server serve` configures uvicorn
    config.load()
    # The lifespan runs as uvicorn runs it: resources open, heap frozen.
    startup: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    done = asyncio.get_running_loop().create_future()
    await startup.put({"type": "lifespan.startup"})

    async def send(message: dict[str, Any]) -> None:
        if message["type"].startswith("lifespan.startup") and not done.done():
            done.set_result(message["type"])

    lifespan = asyncio.create_task(config.loaded_app(
        {"type": "lifespan", "asgi": {"version": "3.0"}}, startup.get, send))
    assert await done == "lifespan.startup.complete"
    directory = app.resources.directory
    assert directory is not None
    assert (await directory.get(SLUG)) is not None  # cached from now on

    loop = asyncio.get_running_loop()
    protocol = http_protocol(config, ServerState(), {}, loop)
    assert isinstance(protocol, FastProtocol)
    client = Transport(("127.0.0.1", 50000))
    protocol.connection_made(client)  # type: ignore[arg-type]
    fast = app.fast_path
    assert fast is not None, "the fast path is on in dev settings"
    # Requests are fed here one after another within a turn of the loop, which a server's
    # clients' do not: with the app's share per turn (router/turns.py) they would wait
    # for later turns. Metering still runs for each; it never defers here.
    assert fast.turns is not None
    fast.turns.share = 1 << 30
    upstream = fast.proxy.client()
    origin = parse_origin(ORIGIN, True)
    assert origin is not None
    conn = OriginConnection(loop, 30.0)
    to_origin = Transport(("127.0.0.1", 9))
    conn.connection_made(to_origin)  # type: ignore[arg-type]
    conn.key = (origin.tls, origin.host, origin.port)
    # Idle in the pool, as a kept-alive connection is: each request takes it, gives it back.
    upstream._idle = {conn.key: [conn]}  # (the bench's own pool entry)
    upstream._idle_count = 1

    raw = request(post, port)
    expected_tail = BODY

    def one() -> None:
        protocol.data_received(raw)
        conn.data_received(ANSWER)
        if not client.written:
            raise SystemExit("no answer was written: the request left the fast path")
        answer = client.written[-1]
        if not answer.endswith(expected_tail) or not answer.startswith(b"HTTP/1.1 200 OK"):
            raise SystemExit(f"unexpected answer: {answer[:200]!r}")
        client.written.clear()
        to_origin.written.clear()

    async def run(count: int) -> None:
        for i in range(count):
            one()
            if i % 1000 == 999:
                # The loop turns now and then, as a server's does: the app directory
                # refreshes its entry in the background before it expires.
                await asyncio.sleep(0)

    await run(2000)  # warm-up
    taken = fast.untasked
    if count:
        return [float(x) for x in counted(one, 100)]
    results = []
    for _ in range(rounds):
        gc.collect()
        began = time.process_time()
        await run(requests)
        results.append((time.process_time() - began) / requests * 1e6)
    if fast.untasked - taken != requests * rounds:
        raise SystemExit("some requests left the fast path; the figure would mix two paths")
    await startup.put({"type": "lifespan.shutdown"})
    await lifespan
    return results


HEADING = "## Fast path CPU per request (bench/fast_path_cpu.py)"
KINDS: tuple[tuple[str, list[str]], ...] = (
    ("GET, 1 KB answer", []), ("POST, 16 KB JSON body, 1 KB answer", ["--post"]))


def _run(root: Path, args: list[str]) -> str:
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args],
                          capture_output=True, text=True, check=True, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})
    return done.stdout.strip().splitlines()[-1]


def _runs_as(root: Path) -> str:
    """Whether that tree's fast path runs compiled (router/native.py; older trees had no
    build, so their sources ran as they are)."""
    # The module's own file too: a tree without router/native.py would find this
    # checkout's through its editable install.
    done = subprocess.run(
        [sys.executable, "-c", "from router import native; print(native.__file__, "
         "native.status())"],
        capture_output=True, text=True, check=False, cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)})
    where, _, status = done.stdout.strip().partition(" ")
    if done.returncode != 0 or not Path(where).is_relative_to(root):
        status = "pure"
    return {"compiled": "compiled with mypyc", "pure": "pure Python"}.get(status, status)


def against(rev: str, rounds: int, requests: int, dry_run: bool) -> None:
    """This tree's router against ``rev``'s, in the same session; writes the section."""
    sys.path.insert(0, str(ROOT / "bench"))
    from proxy_bench import machine
    from report import write_section

    info = machine()
    described = subprocess.run(["git", "log", "-1", "--format=%h %s", rev], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    head = subprocess.run(["git", "log", "-1", "--format=%h", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.strip()
    there = Path(tempfile.mkdtemp(prefix="fast-path-rev-")) / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(there), rev], cwd=ROOT,
                   check=True)
    rows = []
    try:
        runs_as = {"here": _runs_as(ROOT), "there": _runs_as(there)}
        for label, args in KINDS:
            counts = {}
            for name, root in (("here", ROOT), ("there", there)):
                found = re.search(r"(\d+) bytecodes and (\d+) calls",
                                  _run(root, ["--count", *args]))
                assert found is not None
                counts[name] = (int(found.group(1)), int(found.group(2)))
            times: dict[str, list[float]] = {"here": [], "there": []}
            for i in range(rounds):  # alternate which goes first: the box drifts
                order = (("here", ROOT), ("there", there))
                for name, root in order if i % 2 == 0 else order[::-1]:
                    line = _run(root, ["--requests", str(requests), "--rounds", "1", *args])
                    times[name].append(float(line.split()[1]))
                print(f"{label} round {i + 1}: {times['here'][-1]:.2f} us here, "
                      f"{times['there'][-1]:.2f} us at {rev}", flush=True)
            ratios = [h / t for h, t in zip(times["here"], times["there"], strict=True)]
            rows.append((label, counts, times, ratios))
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(there)], cwd=ROOT,
                       check=False)
        shutil.rmtree(there.parent, ignore_errors=True)  # the temporary directory it was in
    lines = [
        HEADING, "",
        f"Run {info['date']} on `{info['uname -m']}`, nproc {info['nproc']}, Python "
        f"{info['python']}; {info['libraries']}. Load average at start: "
        f"{info['load average at start']} (a shared machine).", "",
        "The router's own work per proxied request, without sockets: one process feeds its "
        "HTTP protocol (`router/fast_protocol.py`) a request from memory, the origin's answer "
        "arrives on a pooled origin connection whose transport keeps what is written, and the "
        "answer written to the client is checked (dev settings, SQLite, one seeded app, "
        "`router.cli.server_config` as `svc-server serve` configures uvicorn). What is "
        "counted is the Python of the fast path both ways and the C it calls (httptools); "
        "the kernel's reads and writes are in the load benchmarks above. Bytecodes and calls "
        "are counted with `sys.settrace`/`sys.setprofile` over 100 requests: the same on "
        "every run. Time is `time.process_time` over "
        f"{requests:,} requests per round, {rounds} rounds alternating between the two "
        "trees; the ratio is the median of each round's. On this shared box rounds of one "
        "tree differ by up to 15%, so a ratio within that says no difference was measured; "
        "fewer bytecodes need not mean less time (calls into C cost too). Compiled modules "
        "(router/native.py) run no bytecode: only the Python they call is counted.", "",
        f"This tree: {head}{' with uncommitted changes' if dirty else ''}, fast path "
        f"{runs_as['here']}. Compared with: {described}, fast path {runs_as['there']}.", "",
        "| Request | Bytecodes | Calls | CPU per request (median) | Ratio of CPU |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, counts, times, ratios in rows:
        (b_here, c_here), (b_there, c_there) = counts["here"], counts["there"]
        lines.append(
            f"| {label} | {b_here:,} vs {b_there:,} ({b_here / b_there:.2f}x) | "
            f"{c_here} vs {c_there} ({c_here / c_there:.2f}x) | "
            f"{statistics.median(times['here']):.1f} vs "
            f"{statistics.median(times['there']):.1f} us | "
            f"**{statistics.median(ratios):.2f}x** |")
    lines += ["", "Every round (us of CPU per request, this tree vs the compared one):", ""]
    for label, _, times, _ in rows:
        pairs = ", ".join(f"{h:.1f}/{t:.1f}" for h, t in
                          zip(times["here"], times["there"], strict=True))
        lines.append(f"- {label}: {pairs}")
    section = "\n".join(lines) + "\n"
    print(section)
    if not dry_run:
        write_section(HEADING, section)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--post", action="store_true", help="a 16 KB JSON POST (case 2)")
    parser.add_argument("--count", action="store_true",
                        help="count bytecodes and calls per request instead of timing")
    parser.add_argument("--against", metavar="REV",
                        help="compare with the router at git revision REV; write the figures")
    parser.add_argument("--dry-run", action="store_true", help="with --against: print only")
    options = parser.parse_args()
    if options.against:
        against(options.against, options.rounds, options.requests, options.dry_run)
        return
    results = uvloop.run(measure(options.requests, options.rounds, options.post,
                                 options.count))
    kind = "POST 16 KB" if options.post else "GET"
    if options.count:
        print(f"{results[0]:.0f} bytecodes and {results[1]:.0f} calls per {kind} request "
              "(the harness's own lines included)")
        return
    for i, us in enumerate(results, 1):
        print(f"round {i}: {us:.2f} us CPU per {kind} request")
    print(f"median: {statistics.median(results):.2f} us")


if __name__ == "__main__":
    main()
