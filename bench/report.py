"""The one writer of docs/BENCHMARKS.md: each benchmark replaces only its own section."""

from __future__ import annotations

from pathlib import Path

REPORT = Path(__file__).resolve().parents[1] / "docs" / "BENCHMARKS.md"


def write_section(heading: str, section: str, path: Path = REPORT) -> None:
    """Replace the section that starts with ``heading``, leaving the others as they are."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    start = text.find(heading)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + len(heading))
        rest = "" if end < 0 else "\n" + text[end + 1:]
        text = text[:start] + section + rest
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
