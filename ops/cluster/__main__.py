"""``python -m ops.cluster``: start the local production topology, print where it is, and
stop everything it started on Ctrl-C (or SIGTERM)."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import threading
from pathlib import Path

from ops.cluster.topology import APPS_DOMAIN, DOMAIN, Cluster, Options
from svc.int_flags import whole_number

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.cluster", description=__doc__)
    parser.add_argument("--root", type=Path, default=REPO / "var" / "cluster",
                        help="state and logs (wiped at start; default var/cluster)")
    parser.add_argument("--port", type=whole_number, default=8443, help="the TLS edge's port")
    parser.add_argument("--instances", type=whole_number, default=2)
    parser.add_argument("--processes", type=whole_number, default=2, help="per instance")
    args = parser.parse_args(argv)
    shutil.rmtree(args.root, ignore_errors=True)
    cluster = Cluster(Options(root=args.root, edge_port=args.port, instances=args.instances,
                              processes=args.processes))
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    print("Starting PostgreSQL, Redis, a Hardhat node, the servers, workers and nginx...",
          flush=True)
    cluster.start()
    try:
        print(describe(cluster), flush=True)
        while not stop.wait(1.0):
            for proc in list(cluster.procs.procs):
                if not proc.alive():
                    print(f"{proc.name} exited ({proc.popen.returncode}); see {proc.log}",
                          file=sys.stderr, flush=True)
                    cluster.procs.forget(proc)
    finally:
        print("Stopping everything...", flush=True)
        cluster.stop()
    return 0


def describe(cluster: Cluster) -> str:
    assert cluster.tls is not None and cluster.chain is not None
    port = cluster.options.edge_port
    instances = ", ".join(f"127.0.0.1:{i.port}" for i in cluster.instances)
    workers = [p.name for p in (cluster.chain_worker, cluster.webhook_worker) if p]
    return "\n".join([
        "",
        f"The topology is up (TLS at nginx on 127.0.0.1:{port}; trust {cluster.tls.ca}).",
        f"  runtime       {cluster.runtime_url('demo')}/",
        f"  API status    {cluster.api_url}/statusz",
        f"  portal        {cluster.url('portal.' + DOMAIN)}/demo",
        f"  console       {cluster.url('console.' + DOMAIN)}/",
        f"  OpenAPI       {cluster.url('docs.' + DOMAIN)}/openapi.json",
        f"  instances     {instances} ({cluster.options.processes} processes each)",
        f"  workers       {', '.join(workers)}",
        f"  PostgreSQL    {cluster.database_url}",
        f"  Redis         {cluster.redis.url}",
        f"  chain         {cluster.chain.url} (Hardhat, chain id {cluster.chain.params.chain_id})",
        f"  logs          {cluster.logs}",
        f"Try: curl --cacert {cluster.tls.ca} {cluster.api_url}/statusz",
        f"(*.{APPS_DOMAIN} and *.{DOMAIN} resolve to loopback in Chromium and curl.)",
        "Ctrl-C stops everything.",
        "",
    ])


if __name__ == "__main__":
    raise SystemExit(main())
