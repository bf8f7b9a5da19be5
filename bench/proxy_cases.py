"""The router beyond small GETs against nginx as a reverse proxy (issue 18's cases).

    .venv/bin/python bench/proxy_cases.py [--case N ...] [--rounds 3] [--duration 8]
                                          [--dry-run]
    .venv/bin/python bench/proxy_cases.py --render-only [--dry-run]

1. a 1 MiB answer: MB/s and proxy CPU per MB;
2. POST of a 16 KB JSON body answered by 1 KB: req/s and p99;
3. 10,000 keep-alive connections, 1,000 req/s spread over them: p99, RSS per connection;
4. a slow origin (200 ms) under 2,000 concurrent requests: added p99, and a fast app's p99
   while it runs;
5. 1,000 WebSocket connections echoing 100-byte messages: messages/s.

Every case runs nginx (``worker_processes`` = the cores) and the router
(``SVCSRV_PROCESSES`` = the cores) in front of the same origins (bench/case_targets.py),
checks each answers correctly before its load, and interleaves the targets for
``--rounds`` rounds; figures are the median of rounds, ratios the median of each round's
ratio. Each case's latest figures are kept in bench/proxy_cases.json and the whole
"Router cases vs nginx" section of docs/BENCHMARKS.md is rendered from it (unless
--dry-run), so rerunning one case replaces only that case; ``--render-only`` rewrites the
section from the kept figures (after editing the profiles, say; with --dry-run it prints the
section instead). Exit code 0 when every case run met its targets.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from case_figures import HEADING, load_results, render_section, save_results
from case_measure import run_line
from case_runs import CASES, intro, shared_configuration
from case_targets import bed, raise_open_files, serve_router
from proxy_bench import machine
from report import write_section

RESULTS = Path(__file__).with_name("proxy_cases.json")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", type=int, nargs="+", choices=sorted(CASES),
                        default=sorted(CASES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=8, help="seconds of load per run")
    parser.add_argument("--dry-run", action="store_true", help="print only, write nothing")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--render-only", action="store_true",
                        help="rewrite the section from bench/proxy_cases.json, run nothing")
    parser.add_argument("--serve-router", nargs="+", metavar="SLUG=ORIGIN",
                        help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve_router:
        serve_router(options.serve_router)
        return 0
    if options.render_only:
        section = render_section(load_results(RESULTS), intro(), shared_configuration())
        if options.dry_run:  # the kept figures still render: what tests/bench checks
            print(section)
        else:
            write_section(HEADING, section)
        return 0
    if not (1 <= options.duration <= 120 and 1 <= options.rounds <= 10):
        parser.error("--duration must be 1..120 and --rounds 1..10")
    signal.signal(signal.SIGTERM, _on_sigterm)
    open_files = raise_open_files()
    results = load_results(RESULTS)
    ok = True
    with bed(options.processes) as place:
        for case in options.case:
            info = machine()
            print(f"case {case}: load average {info['load average at start']}",
                  file=sys.stderr, flush=True)
            run = run_line(info) + f" Open-file limit (RLIMIT_NOFILE): {open_files:,}."
            result = CASES[case](place, options.rounds, options.duration, run)
            ok = ok and result.met
            results[case] = result
            if not options.dry_run:  # kept as soon as measured: a later case may fail
                save_results(RESULTS, results)
                write_section(HEADING, render_section(results, intro(), shared_configuration()))
    print(render_section({c: results[c] for c in options.case}, intro(),
                         shared_configuration()))
    return 0 if ok else 1


def _on_sigterm(*_: object) -> None:
    raise SystemExit(143)


if __name__ == "__main__":
    raise SystemExit(main())
