"""``bench/quickstart_bench.py`` as a module (``bench/`` is scripts, not a package): the
tests run its flow and use its payer, so the figures and the tests measure one thing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench" / "quickstart_bench.py"


def load() -> ModuleType:
    name = "quickstart_bench"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


quickstart = load()
