"""CPU and wall time a server process and an ops command take to start.

    .venv/bin/python bench/startup_bench.py [--rounds 3] [--backend both|sqlite] [--dry-run]
    .venv/bin/python bench/startup_bench.py --against REV [--rounds 5] [--dry-run]

Each start is the command an operator runs, as its own process, configured only by
``SVCSRV_*`` variables, as the tests and the cluster (ops/cluster/) run it: dev mode on a
database already migrated, Redis, and a JSON-RPC chain (the in-process EVM behind JSON-RPC,
tests/support/evm_node.py, so that /statusz answers 200), no relayer key, the payment
workers off. Timed:

- ``svc-server serve``, one process, then ``SVCSRV_PROCESSES=2``, on SQLite and (unless
  ``--backend sqlite``) PostgreSQL: from the command's start until every process listens and
  the first /statusz answers 200; the CPU is that of the whole process tree at that moment
  (the parent, its spawned processes, multiprocessing's helper), from /proc;
- ``svc-ops --help``, and ``svc-ops db-revision`` (a read-only command on the database):
  until it exits, CPU from ``getrusage`` of the waited child.

``--against REV`` times git revision REV's tree as well (checked out in a temporary
worktree; the fast path's compiled modules are copied to it when its sources are the same,
else it runs them as Python), in rounds that alternate which tree goes first, and reports
the median of each tree and the median of each round's ratio. Both trees are byte-compiled
first: a tree without its ``.pyc`` files (``PYTHONDONTWRITEBYTECODE``) compiles every module
at each start. Writes its section of docs/BENCHMARKS.md unless ``--dry-run``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.support (Redis, PostgreSQL, the EVM node, /proc/net/tcp)

BIN = Path(sys.executable).parent
HEADING = "## Start-up CPU (bench/startup_bench.py)"
TICKS = os.sysconf("SC_CLK_TCK")
PACKAGES = ("router", "payments", "portal", "manifest", "ops", "svc", "examples")


@dataclass(frozen=True)
class Case:
    label: str
    kind: str  # "server" or "ops"
    backend: str  # "sqlite" or "postgresql"
    processes: int = 1
    argv: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tree:
    name: str
    root: Path
    databases: dict[str, str]  # backend -> URL, migrated by this tree's own code
    fast_path: str  # fast_path_of(root), read while the tree exists


def cases(backends: list[str]) -> list[Case]:
    found = [Case(f"svc-server serve, {n} process{'es' if n > 1 else ''}, {b}", "server", b, n)
             for b in backends for n in (1, 2)]
    return [*found, Case("svc-ops --help", "ops", "sqlite", argv=("--help",)),
            Case("svc-ops db-revision", "ops", "sqlite", argv=("db-revision",))]


def tree_cpu(pid: int) -> float:
    """Seconds of CPU (user and system) of ``pid`` and every live process below it."""
    children: dict[int, list[tuple[int, float]]] = {}
    own = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        used = (int(fields[11]) + int(fields[12])) / TICKS
        if int(stat.parent.name) == pid:
            own = used
        children.setdefault(int(fields[1]), []).append((int(stat.parent.name), used))
    total, todo = own, [pid]
    while todo:
        for child, used in children.get(todo.pop(), []):
            total += used
            todo.append(child)
    return total


def statusz(port: int) -> int | None:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            conn.request("GET", "/statusz", headers={"Host": f"api.localhost:{port}"})
            response = conn.getresponse()
            response.read()
            return response.status
        finally:
            conn.close()
    except OSError:
        return None


def server_start(env: dict[str, str], root: Path, processes: int,
                 log: Path) -> tuple[float, float]:
    """(CPU s, wall s) of ``svc-server serve`` until it serves; then stopped."""
    from tests.support.services import listeners

    port = int(env["SVCSRV_BIND_PORT"])
    began = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen([str(BIN / "svc-server"), "serve"], env=env, cwd=root,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        while not (listeners(port) >= processes and statusz(port) == 200):
            if proc.poll() is not None:
                raise SystemExit(f"svc-server exited ({proc.returncode}):\n"
                                 + log.read_text(errors="replace")[-3000:])
            if time.monotonic() - began > 120:
                raise SystemExit("svc-server did not serve in 120 s:\n"
                                 + log.read_text(errors="replace")[-3000:])
            time.sleep(0.02)
        wall = time.monotonic() - began
        return tree_cpu(proc.pid), wall
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def ops_run(env: dict[str, str], root: Path, argv: tuple[str, ...]) -> tuple[float, float]:
    """(CPU s, wall s) of ``svc-ops <argv>`` to its exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    subprocess.run([str(BIN / "svc-ops"), *argv], env=env, cwd=root, check=True,
                   capture_output=True)
    wall = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime), wall


class Bed:
    """Redis, the EVM node and PostgreSQL, shared by both trees' runs."""

    def __init__(self, stack: contextlib.ExitStack, backends: list[str], work: Path) -> None:
        from tests.support.evm_node import evm_node
        from tests.support.services import postgres_server, redis_server

        self.work = work
        self.redis_url = stack.enter_context(redis_server())
        self.node = stack.enter_context(evm_node())
        self.pg_admin = (stack.enter_context(postgres_server()) if "postgresql" in backends
                         else None)

    def env(self, tree: Tree, backend: str, processes: int) -> dict[str, str]:
        from tests.support.services import free_port

        port = free_port()
        base = f"localhost:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("SVCSRV_")}
        values = {
            "MODE": "dev", "DATABASE_URL": tree.databases[backend], "REDIS_URL": self.redis_url,
            "BIND_PORT": str(port), "APPS_PORT": str(port), "PROCESSES": str(processes),
            "BASE_URL": f"http://api.{base}", "PORTAL_URL": f"http://portal.{base}",
            "CONSOLE_URL": f"http://console.{base}", "DOCS_URL": f"http://docs.{base}",
            "CHAIN_WORKERS": "false", "WEBHOOK_WORKERS": "false",
            **{key.upper(): str(value) for key, value in self.node.server_settings().items()},
        }
        env.update({f"SVCSRV_{key}": value for key, value in values.items()})
        # The tree's own code, not the editable install's checkout.
        env["PYTHONPATH"] = str(tree.root)
        return env

    def databases(self, name: str, backends: list[str]) -> dict[str, str]:
        found = {"sqlite": f"sqlite:///{self.work / name / 'svc.db'}"}
        (self.work / name).mkdir(parents=True, exist_ok=True)
        if self.pg_admin is not None and "postgresql" in backends:
            import psycopg

            with psycopg.connect(self.pg_admin, autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE startup_{name}")
            found["postgresql"] = self.pg_admin.rsplit("/", 1)[0] + f"/startup_{name}"
        return found

    def migrate(self, tree: Tree, backends: list[str]) -> None:
        for backend in backends:
            env = self.env(tree, backend, 1)
            subprocess.run([str(BIN / "svc-ops"), "migrate"], env=env, cwd=tree.root,
                           check=True, capture_output=True)


def run_case(bed: Bed, tree: Tree, case: Case) -> tuple[float, float]:
    env = bed.env(tree, case.backend, case.processes)
    if case.kind == "ops":
        return ops_run(env, tree.root, case.argv)
    return server_start(env, tree.root, case.processes, bed.work / f"{tree.name}.log")


def byte_compile(root: Path) -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", *PACKAGES], cwd=root,
                   check=True, stdout=subprocess.DEVNULL)


def fast_path_of(root: Path) -> str:
    """Whether that tree's fast path runs compiled (router/native.py)."""
    done = subprocess.run([sys.executable, "-c", "from router import native; "
                           "print(native.__file__, native.status())"],
                          capture_output=True, text=True, check=False, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})
    where, _, status = done.stdout.strip().partition(" ")
    if done.returncode != 0 or not Path(where).is_relative_to(root):
        return "pure Python"
    return {"compiled": "compiled with mypyc", "pure": "pure Python"}.get(status, status)


@contextlib.contextmanager
def revision_tree(rev: str) -> Iterator[Path]:
    """``rev`` checked out in a temporary worktree, this tree's compiled fast path copied in
    when its sources are the same (router/native.py's stamp says so), removed after."""
    there = Path(tempfile.mkdtemp(prefix="startup-rev-")) / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(there), rev], cwd=ROOT,
                   check=True)
    try:
        built = [*ROOT.joinpath("router").glob("*.so"), ROOT / "router" / "native.stamp"]
        for path in built:
            if path.exists():
                shutil.copy2(path, there / "router" / path.name)
        if fast_path_of(there) != "compiled with mypyc":
            for path in built:
                (there / "router" / path.name).unlink(missing_ok=True)
        yield there
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(there)], cwd=ROOT,
                       check=False)
        shutil.rmtree(there.parent, ignore_errors=True)


def describe(root: Path, rev: str = "HEAD") -> str:
    text = subprocess.run(["git", "log", "-1", "--format=%h %s", rev], cwd=root,
                          capture_output=True, text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           cwd=root, capture_output=True, text=True, check=True).stdout.strip()
    return text + (" (with uncommitted changes)" if dirty and rev == "HEAD" else "")


def measure(trees: list[Tree], bed: Bed, chosen: list[Case],
            rounds: int) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """Every case, ``rounds`` times per tree; within a round the trees alternate order."""
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for i in range(rounds):
        for case in chosen:
            for tree in trees if i % 2 == 0 else trees[::-1]:
                cpu, wall = run_case(bed, tree, case)
                results.setdefault((tree.name, case.label), []).append((cpu, wall))
            figures = ", ".join(f"{tree.name} {results[(tree.name, case.label)][-1][0]:.2f} s "
                                f"CPU / {results[(tree.name, case.label)][-1][1]:.2f} s wall"
                                for tree in trees)
            print(f"round {i + 1}: {case.label}: {figures}", flush=True)
    return results


def section(trees: list[Tree], chosen: list[Case], rounds: int,
            results: dict[tuple[str, str], list[tuple[float, float]]],
            described: dict[str, str], load: str) -> str:
    here = trees[0]
    lines = [
        HEADING, "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on `{platform.machine()}`, nproc "
        f"{os.cpu_count()}, Python {platform.python_version()}. Load average at start: "
        f"{load} (a shared machine).", "",
        "What a start costs, each measured as its own process, configured only by `SVCSRV_*` "
        "variables as the tests and the cluster (ops/cluster/) run it: dev mode on a migrated "
        "database, Redis, a JSON-RPC chain (the in-process EVM behind JSON-RPC, so /statusz "
        "answers 200), no relayer key, the payment workers off. A server counts until every "
        "process listens and /statusz first answers 200, its CPU that of the whole process "
        "tree then (from /proc); `svc-ops` until it exits (getrusage). Both trees "
        f"byte-compiled first; {rounds} rounds, the trees alternating which goes first; "
        "medians, and the median of each round's ratio (this shared box drifts between "
        "rounds more than within one).", "",
        f"This tree: {described[here.name]}, fast path {here.fast_path}.",
    ]
    if len(trees) > 1:
        there = trees[1]
        lines += [f"Compared with: {described[there.name]}, fast path {there.fast_path}.", "",
                  "| Start | CPU | Ratio of CPU | Wall to ready | Ratio of wall |",
                  "|---|---:|---:|---:|---:|"]
        for case in chosen:
            mine, theirs = results[(here.name, case.label)], results[(there.name, case.label)]
            cells = []
            for index in (0, 1):
                ratio = statistics.median(m[index] / t[index]
                                          for m, t in zip(mine, theirs, strict=True))
                cells.append(f"{statistics.median(m[index] for m in mine):.2f} vs "
                             f"{statistics.median(t[index] for t in theirs):.2f} s | "
                             f"**{ratio:.2f}x**")
            lines.append(f"| {case.label} | {cells[0]} | {cells[1]} |")
    else:
        lines += ["", "| Start | CPU | Wall to ready |", "|---|---:|---:|"]
        for case in chosen:
            mine = results[(here.name, case.label)]
            lines.append(f"| {case.label} | {statistics.median(m[0] for m in mine):.2f} s | "
                         f"{statistics.median(m[1] for m in mine):.2f} s |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", choices=("both", "sqlite"), default="both")
    parser.add_argument("--against", metavar="REV",
                        help="compare with git revision REV's tree, in alternating rounds")
    parser.add_argument("--dry-run", action="store_true", help="print only; write nothing")
    options = parser.parse_args()
    backends = ["sqlite", "postgresql"] if options.backend == "both" else ["sqlite"]
    chosen = cases(backends)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    work = Path(tempfile.mkdtemp(prefix="startup-bench-"))
    work.chmod(0o755)
    with contextlib.ExitStack() as stack:
        bed = Bed(stack, backends, work)
        roots = [("here", ROOT)]
        described = {"here": describe(ROOT)}
        if options.against:
            roots.append(("there", stack.enter_context(revision_tree(options.against))))
            described["there"] = describe(ROOT, options.against)
        trees = [Tree(name, root, bed.databases(name, backends), fast_path_of(root))
                 for name, root in roots]
        for tree in trees:
            byte_compile(tree.root)
            bed.migrate(tree, backends)
        results = measure(trees, bed, chosen, options.rounds)
    shutil.rmtree(work, ignore_errors=True)
    text = section(trees, chosen, options.rounds, results, described, load)
    print(text)
    if not options.dry_run:
        from report import write_section

        write_section(HEADING, text)


if __name__ == "__main__":
    main()
