"""The servers a local topology runs on loopback: PostgreSQL, Redis, a Hardhat node with
our contracts, nginx. Each can be stopped and started again on the same port and data,
which is what the fault tests do to them.

PostgreSQL refuses to run as root, so as root its commands run as the ``postgres`` user on
a data directory made for it.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from eth_account import Account
from eth_account.signers.local import LocalAccount

from ops.cluster.processes import Proc, Processes, free_port, wait_until
from payments.chain.contracts import CONTRACTS_DIR
from payments.chain.deploy import deploy_local
from payments.chain.json_rpc import node
from payments.chain.params import ChainParams


def pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"PostgreSQL's {name} not found: run scripts/install.sh")
    return path


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@dataclass
class Postgres:
    """A PostgreSQL server of our own under ``root``; ``url`` is its superuser."""

    root: Path
    port: int = field(default_factory=free_port)
    max_connections: int = 400
    durable: bool = False  # tests trade durability for speed; a topology keeps fsync

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def init(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self.root.chmod(0o755)
        subprocess.run(_as_postgres([pg_bin("initdb"), "-D", str(self.data), "-A", "trust",
                                     "-U", "postgres", "--no-sync", "-E", "UTF8"]),
                       check=True, stdout=subprocess.DEVNULL)

    def start(self) -> None:
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
                   f"-c max_connections={self.max_connections}")
        if not self.durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        subprocess.run(_as_postgres([pg_bin("pg_ctl"), "-D", str(self.data), "-o", options,
                                     "-l", str(self.root / "log"), "-w", "start"]),
                       check=True, stdout=subprocess.DEVNULL)

    def pid(self) -> int | None:
        pid_file = self.data / "postmaster.pid"
        try:
            return int(pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self) -> None:
        """A "fast" shutdown: clients are disconnected, committed work is kept."""
        pid = self.pid()
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGINT)  # "fast": SIGTERM is "smart", which waits for clients
        except ProcessLookupError:
            return
        wait_until(lambda: not (self.data / "postmaster.pid").exists(), "PostgreSQL stopped",
                   timeout=30)

    def remove(self) -> None:
        """Delete the data directory, in the background: a test session leaves hundreds of
        databases (tens of thousands of files) whose removal took minutes on a loaded box,
        and nothing waits for the disk space."""
        # The shell puts rm in the background and exits at once: rm outlives us, detached.
        subprocess.run(["sh", "-c", 'rm -rf -- "$1" >/dev/null 2>&1 &', "sh", str(self.root)],
                       check=True, stdin=subprocess.DEVNULL, start_new_session=True)


@dataclass
class Redis:
    """A redis-server on ``port`` without persistence, started and stopped at will."""

    procs: Processes
    logs: Path
    port: int = field(default_factory=free_port)
    proc: Proc | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        redis_bin = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.proc = self.procs.start("redis", [
            redis_bin, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no"], self.logs / "redis.log")
        wait_until(lambda: _accepts(self.port), "Redis accepting", self.proc, timeout=10)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.procs.forget(self.proc)
            self.proc = None


# Hardhat's default accounts 0 and 1: test keys published with Hardhat itself, never funded
# anywhere real. Account 0 deploys and owns the contracts; account 1 relays.
HARDHAT_OWNER_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
HARDHAT_RELAYER_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"
HARDHAT = CONTRACTS_DIR / "node_modules" / ".bin" / "hardhat"


@dataclass
class HardhatNode:
    url: str
    params: ChainParams
    proc: Proc


def start_hardhat(procs: Processes, logs: Path, port: int | None = None) -> HardhatNode:
    """A Hardhat node (``npm ci`` in contracts/) with TestUSDC and BudgetSpenderV2 deployed
    by account 0 and account 1 made the relayer."""
    if not HARDHAT.exists():
        raise RuntimeError("Hardhat is not installed: run scripts/install.sh")
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "HARDHAT_DISABLE_TELEMETRY_PROMPT": "true"}
    proc = procs.start("hardhat", [str(HARDHAT), "node", "--hostname", "127.0.0.1",
                                   "--port", str(port)], logs / "hardhat.log",
                       env=env, cwd=CONTRACTS_DIR)
    wait_until(lambda: _rpc_answers(url), "the Hardhat node answering", proc)
    return HardhatNode(url, deploy_contracts(url), proc)


def _rpc_answers(url: str) -> bool:
    try:
        return httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId",
                                     "params": []}, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def deploy_contracts(url: str) -> ChainParams:
    """TestUSDC and BudgetSpenderV2 by account 0, account 1 their relayer: the dev chain's
    deploy (payments/chain/deploy.py), on the node."""
    relayer: LocalAccount = Account.from_key(HARDHAT_RELAYER_KEY)
    deployed = deploy_local(node(url), HARDHAT_OWNER_KEY, [relayer.address])
    return deployed.params(network="hardhat")


NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def start_nginx(procs: Processes, prefix: Path, conf_text: str, port: int) -> Proc:
    prefix.mkdir(parents=True, exist_ok=True)
    for temp in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (prefix / temp).mkdir(exist_ok=True)
    conf = prefix / "nginx.conf"
    conf.write_text(conf_text)
    check = subprocess.run([NGINX, "-t", "-p", str(prefix), "-e", str(prefix / "error.log"),
                            "-c", str(conf)], capture_output=True, text=True, check=False)
    if check.returncode != 0:
        raise RuntimeError(f"nginx refused its configuration:\n{check.stderr}")
    proc = procs.start("nginx", [NGINX, "-p", str(prefix), "-e", str(prefix / "error.log"),
                                 "-c", str(conf), "-g", "daemon off;"], prefix / "stdout.log")
    wait_until(lambda: _accepts(port), "nginx accepting", proc, timeout=15)
    time.sleep(0.05)
    return proc
