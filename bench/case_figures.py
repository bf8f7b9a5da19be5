"""The pure part of bench/proxy_cases.py: percentiles, per-round ratios, the per-case
results kept in bench/proxy_cases.json, and the docs/BENCHMARKS.md section rendered from
them (whole, every time: rerunning one case replaces only that case's figures)."""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

HEADING = "## Router cases vs nginx (bench/proxy_cases.py)"

# A round: target -> metric -> value.
Round = dict[str, dict[str, float]]


def percentile(ordered: list[float], q: float) -> float:
    """The ``q``-th percentile of an ascending list (nearest rank); 0 for an empty one."""
    if not ordered:
        return 0.0
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n * q / 100)
    return ordered[int(min(rank, len(ordered))) - 1]


def median_of(rounds: list[Round], target: str, metric: str) -> float:
    return float(statistics.median(r[target][metric] for r in rounds))


def median_ratio(rounds: list[Round], target: str, base: str, metric: str) -> float:
    """The median over rounds of ``target``'s figure over ``base``'s in the same round (a
    round runs them back to back, so the ratio shares the shared box's conditions)."""
    return float(statistics.median(r[target][metric] / r[base][metric] for r in rounds
                                   if r[base][metric]))


def median_difference(rounds: list[Round], target: str, base: str, metric: str) -> float:
    return float(statistics.median(r[target][metric] - r[base][metric] for r in rounds))


@dataclass
class Check:
    what: str  # "router MB/s vs nginx's"
    shown: str  # the measured figure, formatted
    target: str  # ">= 50%"
    met: bool


@dataclass
class Column:
    metric: str
    label: str
    spec: str  # a format spec: ",.0f", ".2f"
    unit: str = ""


@dataclass
class CaseResult:
    case: int
    title: str
    run: str  # when, the machine, the load average at start
    load: str  # the load generator(s) and their parameters
    targets: dict[str, str]  # key -> label, in table order
    columns: list[Column]
    rounds: list[Round]
    checks: list[Check]
    configuration: list[tuple[str, str, str]] = field(default_factory=list)  # (label, lang, text)
    notes: list[str] = field(default_factory=list)

    @property
    def met(self) -> bool:
        return all(c.met for c in self.checks)


def load_results(path: Path) -> dict[int, CaseResult]:
    if not path.exists():
        return {}
    raw = json.loads(path.read_text(encoding="utf-8"))
    results = {}
    for key, value in raw.items():
        value["columns"] = [Column(**c) for c in value["columns"]]
        value["checks"] = [Check(**c) for c in value["checks"]]
        value["configuration"] = [tuple(c) for c in value["configuration"]]
        results[int(key)] = CaseResult(**value)
    return results


def save_results(path: Path, results: dict[int, CaseResult]) -> None:
    data = {str(k): asdict(results[k]) for k in sorted(results)}
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def cell(value: float, column: Column) -> str:
    return f"{value:{column.spec}}{column.unit}"


def render_case(result: CaseResult) -> str:
    verdict = "all targets met" if result.met else "below target"
    lines = [f"### Case {result.case}: {result.title} ({verdict})", "", result.run, "",
             result.load, ""]
    lines += [f"- {c.what}: **{c.shown}** " + (
        f"(target {c.target}: {'met' if c.met else 'MISSED'})" if c.target else
        "(reported; no target)") for c in result.checks]
    lines += ["", "Median of rounds:", "",
              "| Target | " + " | ".join(c.label for c in result.columns) + " |",
              "|---|" + "---:|" * len(result.columns)]
    for key, label in result.targets.items():
        cells = [cell(median_of(result.rounds, key, c.metric), c) for c in result.columns]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "Every round:", "",
              "| Round | Target | " + " | ".join(c.label for c in result.columns) + " |",
              "|---:|---|" + "---:|" * len(result.columns)]
    for i, one in enumerate(result.rounds, 1):
        for key in result.targets:
            cells = [cell(one[key][c.metric], c) for c in result.columns]
            lines.append(f"| {i} | {key} | " + " | ".join(cells) + " |")
    if result.notes:
        lines += ["", *[n for note in result.notes for n in (note, "")]][:-1]
    for label, lang, text in result.configuration:
        lines += ["", f"{label}:", "", f"```{lang}", text.rstrip(), "```"]
    return "\n".join(lines) + "\n"


def render_section(results: dict[int, CaseResult], intro: str, shared: str = "") -> str:
    """The whole section: ``intro``, every kept case in order, then ``shared`` (the
    configuration common to the cases)."""
    parts = [HEADING, "", intro, ""]
    for case in sorted(results):
        parts += [render_case(results[case])]
    if shared:
        parts += [shared]
    return "\n".join(parts)
