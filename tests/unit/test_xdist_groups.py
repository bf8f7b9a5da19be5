"""The suite's own scheduling: a module listed in tests/conftest.py's ``_ONE_WORKER`` runs
all its tests on one pytest-xdist worker, so its costly module fixture starts once."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tests.conftest import one_worker_group

ROOT = Path(__file__).resolve().parents[2]


def test_only_the_listed_modules_are_grouped() -> None:
    assert one_worker_group("tests/deploy/test_topology.py::test_x") == "tests.deploy.test_topology"
    assert one_worker_group("tests/chain/test_json_rpc.py::test_y[a]") == (
        "tests.chain.test_json_rpc")
    assert one_worker_group("tests/bench/test_benches_run.py::test_gas_bench") == (
        "tests.bench.test_benches_run")
    assert one_worker_group("tests/chain/test_settlement.py::test_z") is None


def test_a_grouped_module_runs_on_one_worker() -> None:
    grouped, spread = "tests/unit/test_topology_figures.py", "tests/unit/test_gating.py"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
         "-p", "no:cacheprovider", grouped, spread],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout[-2000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, test in re.findall(r"\[(gw\d)\] \[ *\d+%\] PASSED (\S+)", run.stdout):
        workers[test.split("::")[0]].add(worker)
    assert set(workers) == {grouped, spread}
    assert len(workers[grouped]) == 1  # every test of it on one worker
