"""What every bench script reports, in one shape: ``Figure`` records and the line that carries them.

A bench script keeps its human output and, at the end of ``main()``, calls ``emit(figures)``:
one line ``BENCH-FIGURES <json>`` that ``bench/run_all.py`` finds in its stdout. A figure is a
median with its min and max, the baseline measured in the same run (name and median), the
BESSER 8.4.1 figure when its code path was driven, and the issue's target with whether it
was met; a figure that misses its target carries the measured reason (``miss``), which
``run_all`` lists under the results' misses. Standard library only, so a script can import it
before anything heavy.
"""

from __future__ import annotations

import json
import operator
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

PREFIX = "BENCH-FIGURES "
TABLE_PREFIX = "BENCH-TABLE "  # a script's own table (markdown lines), copied into RESULTS.md as it is

_OPS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt}


@dataclass
class Target:
    """A bound on a figure: on its median, on its ratio to the baseline, or on its ratio to BESSER's figure."""

    op: str
    bound: float
    on_ratio: bool = False
    on_besser: bool = False

    def text(self, unit: str) -> str:
        if self.on_besser:
            return f"{self.op} {self.bound:.3g}x BESSER"
        return f"{self.op} {self.bound:.3g}x baseline" if self.on_ratio else f"{self.op} {self.bound:g} {unit}"


@dataclass
class Figure:
    """One measured figure, side by side with what it is compared to."""

    name: str
    median: float
    min: float
    max: float
    unit: str
    baseline: str | None = None
    baseline_median: float | None = None
    besser: float | None = None
    besser_name: str | None = None
    target: str | None = None
    met: bool | None = None
    group: str = ""
    note: str = ""
    miss: str = ""  # why the target is missed, measured (kept only when it is)
    n: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.baseline_median in (None, 0):
            return None
        return self.median / self.baseline_median

    @property
    def besser_ratio(self) -> float | None:
        """Median over BESSER's figure, when BESSER's code path was driven in the same run."""
        if self.besser in (None, 0):
            return None
        return self.median / self.besser

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ratio"] = self.ratio
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Figure:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def figure(
    name: str,
    samples: Sequence[float],
    unit: str,
    *,
    baseline: tuple[str, Sequence[float] | float] | None = None,
    besser: tuple[str, Sequence[float] | float] | None = None,
    target: Target | None = None,
    group: str = "",
    note: str = "",
    miss: str = "",
) -> Figure:
    """A ``Figure`` from raw samples; baselines and BESSER figures may be samples or a median.

    ``target`` bounds the median, or its ratio to the baseline (``on_ratio``) or to BESSER's figure
    (``on_besser``); ``miss`` is the measured reason the target is missed, kept only when it is."""
    values = list(samples)
    if not values:
        raise ValueError(f"figure {name!r} has no samples")
    fig = Figure(name, statistics.median(values), min(values), max(values), unit, group=group, note=note, n=len(values))
    if baseline is not None:
        fig.baseline, fig.baseline_median = baseline[0], _median(baseline[1])
    if besser is not None:
        fig.besser_name, fig.besser = besser[0], _median(besser[1])
    if target is not None:
        fig.target = target.text(unit)
        value = fig.besser_ratio if target.on_besser else fig.ratio if target.on_ratio else fig.median
        fig.met = None if value is None else bool(_OPS[target.op](value, target.bound))
        fig.miss = miss if fig.met is False else ""
    return fig


def _median(value: Sequence[float] | float) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    return statistics.median(list(value))


def emit(figures: Iterable[Figure]) -> None:
    """Print the machine-readable line ``run_all`` collects (the last thing a script prints)."""
    print(PREFIX + json.dumps([f.to_json() for f in figures]), flush=True)


def collect(stdout: str) -> list[Figure] | None:
    """The figures in a script's output (the last ``BENCH-FIGURES`` line), or None when it has none."""
    found = None
    for line in stdout.splitlines():
        if line.startswith(PREFIX):
            found = line[len(PREFIX) :]
    if found is None:
        return None
    return [Figure.from_json(item) for item in json.loads(found)]


def emit_table(title: str, lines: Iterable[str]) -> None:
    """Print a table of the script's own (markdown lines) for ``run_all`` to copy under ``title``."""
    print(TABLE_PREFIX + json.dumps({"title": title, "lines": list(lines)}), flush=True)


def collect_tables(stdout: str) -> list[dict[str, Any]]:
    """Every ``BENCH-TABLE`` of a script's output, in order."""
    return [json.loads(line[len(TABLE_PREFIX):]) for line in stdout.splitlines() if line.startswith(TABLE_PREFIX)]
