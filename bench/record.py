"""What ``make bench`` measured, per script, kept in ``bench/results.json`` so a partial run merges.

``run_all.py --only search`` re-measures one script; its rows must replace that script's rows and
leave the others as they were, each still saying when (and at what load) it was measured. So the
record is kept per script: its status, seconds, the date and load average of its own run, the
machine it ran on, its figures and tables, and the tail of its output when its figures could not
be read. ``RESULTS.md`` is rendered from this record (``report.py``), never parsed back.
Standard library only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from common import Figure

FORMAT = "besser-jupyter-agent/bench-results"
VERSION = 1


@dataclass
class ScriptResult:
    """One script's latest run, as kept in the record."""

    name: str
    status: str  # ok | failed (exit N) | timed out after S s | not collected (...) | unreadable figures (...)
    seconds: float
    measured: str  # when it ran, UTC
    load: str = ""  # 1-minute load average before -> after its run (others share the machine)
    machine: dict[str, str] = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)
    tables: list[dict[str, Any]] = field(default_factory=list)
    output_tail: list[str] = field(default_factory=list)  # kept when its figures could not be read

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["figures"] = [f.to_json() for f in self.figures]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScriptResult:
        known = set(cls.__dataclass_fields__)
        kept = {k: v for k, v in data.items() if k in known}
        kept["figures"] = [Figure.from_json(f) for f in data.get("figures", [])]
        return cls(**kept)


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def load(path: Path) -> list[ScriptResult]:
    """The record at ``path``; an absent one is empty. An unreadable one is an error, named."""
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}, not {FORMAT!r}")
        return [ScriptResult.from_json(item) for item in data["scripts"]]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path} is not a bench record ({exc}); move it aside and run make bench") from None


def merge(kept: Iterable[ScriptResult], fresh: Iterable[ScriptResult]) -> list[ScriptResult]:
    """``kept`` with every script of ``fresh`` replaced by its fresh run (new scripts added), by name."""
    merged = {r.name: r for r in kept}
    merged.update({r.name: r for r in fresh})
    return [merged[name] for name in sorted(merged)]


def save(path: Path, results: Iterable[ScriptResult]) -> None:
    """Write the record whole (a temporary file renamed over it: a crash leaves the old one)."""
    text = json.dumps({"format": FORMAT, "version": VERSION, "scripts": [r.to_json() for r in results]}, indent=1)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(text + "\n", encoding="utf-8")
    os.replace(temporary, path)
