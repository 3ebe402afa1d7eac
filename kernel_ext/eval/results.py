"""A suite's results: each run's verdict and metrics, summed per task and overall, as JSON and text.

The pass rate of a task is k passes out of n runs; its uncertainty is the **Wilson score
interval** at 95 % (z = 1.96), which stays inside [0, 1] and is honest at small n (1 pass out of 1
is [21 %, 100 %], not 100 %). The overall rate pools every run as one Bernoulli trial, which
assumes tasks are alike; it says how often this provider succeeded on this suite, not more.

A refusal is a tool result that failed, by its error code (the guard the model hit). It counts as
*recovered* when a later call of the same tool in that run succeeded (``runner.run_metrics``).
Nothing here decides a verdict: the verifier did, per run.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Z95 = 1.959964  # the normal quantile of a two-sided 95 % interval
INTERVAL = "Wilson score interval, 95 %"
RESULTS_VERSION = 1


def wilson(passes: int, runs: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``passes`` out of ``runs`` (0..1 each end; (0, 1) with no runs)."""
    if runs <= 0:
        return 0.0, 1.0
    if not 0 <= passes <= runs:
        raise ValueError(f"{passes} passes out of {runs} runs")
    p = passes / runs
    denominator = 1 + z * z / runs
    centre = (p + z * z / (2 * runs)) / denominator
    half = z * math.sqrt(p * (1 - p) / runs + z * z / (4 * runs * runs)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class Tally:
    """Passes, sums and counters over some runs (one task's, or all of them)."""

    runs: int = 0
    passes: int = 0
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0
    repairs: int = 0
    tool_calls: Counter[str] = field(default_factory=Counter)
    refusals: Counter[str] = field(default_factory=Counter)
    recovered: Counter[str] = field(default_factory=Counter)
    failed_checks: Counter[str] = field(default_factory=Counter)
    ended: Counter[str] = field(default_factory=Counter)  # the host's end status of each run
    approvals: Counter[str] = field(default_factory=Counter)  # cards by outcome and who answered

    def add(self, run: dict[str, Any]) -> None:
        metrics = run["metrics"]
        self.runs += 1
        self.passes += bool(run["passed"])
        self.turns += int(metrics.get("turns", 0))
        self.input_tokens += int(metrics.get("input_tokens", 0))
        self.output_tokens += int(metrics.get("output_tokens", 0))
        self.cost_usd += float(metrics.get("cost_usd", 0.0))
        self.wall_s += float(metrics.get("wall_s", 0.0))
        self.repairs += int(metrics.get("repair_rounds", 0))
        self.tool_calls.update(metrics.get("tool_calls", {}))
        self.refusals.update(metrics.get("refusals", {}))
        self.recovered.update(metrics.get("recovered", {}))
        self.failed_checks.update(run["report"]["failed"])
        self.ended[str(metrics.get("status", "") or "none")] += 1
        self.approvals.update(metrics.get("approvals", {}))

    @property
    def rate(self) -> float:
        return self.passes / self.runs if self.runs else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.passes, self.runs)

    def as_dict(self) -> dict[str, Any]:
        low, high = self.interval
        return {
            "runs": self.runs, "passes": self.passes, "pass_rate": round(self.rate, 4),
            "interval": [round(low, 4), round(high, 4)], "turns": self.turns,
            "mean_turns": round(self.turns / self.runs, 2) if self.runs else 0.0,
            "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
            "cost_usd": round(self.cost_usd, 6), "wall_s": round(self.wall_s, 3), "repair_rounds": self.repairs,
            "tool_calls": dict(sorted(self.tool_calls.items())),
            "refusals": {code: {"hits": hits, "recovered": self.recovered.get(code, 0)} for code, hits in sorted(self.refusals.items())},
            "failed_checks": dict(self.failed_checks.most_common()), "ended": dict(sorted(self.ended.items())),
            "approvals": dict(sorted(self.approvals.items())),
        }


@dataclass
class SuiteResults:
    """What one ``besser-agent eval`` ran: who answered (provider, approvals) and every run."""

    provider: dict[str, Any]  # spec, kind, label, model, notice (a replay says what it was recorded from)
    approvals: dict[str, Any]  # the labelled policy that answered every card, and whether shell tools were on
    runs: list[dict[str, Any]] = field(default_factory=list)  # task_id, repeat, passed, report, metrics, cassette...
    planned: int = 0  # how many runs were asked for (0: as many as there are); fewer ran when the suite stopped
    stopped: str = ""  # why the suite ended before its plan (Ctrl-C, an endpoint that cannot answer), if it did

    def tasks(self) -> dict[str, Tally]:
        out: dict[str, Tally] = {}
        for run in self.runs:
            out.setdefault(run["task_id"], Tally()).add(run)
        return out

    def overall(self) -> Tally:
        total = Tally()
        for run in self.runs:
            total.add(run)
        return total

    @property
    def all_passed(self) -> bool:
        return bool(self.runs) and all(run["passed"] for run in self.runs)

    def as_dict(self) -> dict[str, Any]:
        return {
            "results": RESULTS_VERSION, "interval": INTERVAL, "provider": self.provider, "approvals": self.approvals,
            "tasks": {task_id: tally.as_dict() for task_id, tally in self.tasks().items()},
            "overall": self.overall().as_dict(), "runs": self.runs,
            "planned": self.planned or len(self.runs), "stopped": self.stopped or None,
        }

    def write(self, path: Path) -> None:
        """Replace ``path`` whole (a temporary file renamed over it): written after every run, so a
        suite stopped half-way leaves a readable file with the runs that finished."""
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.partial")
        temporary.write_text(json.dumps(self.as_dict(), indent=2) + "\n", encoding="utf-8")
        os.replace(temporary, path)

    @classmethod
    def read(cls, path: Path) -> SuiteResults:
        """Results written by ``write`` (the summaries are recomputed from the runs)."""
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("results") != RESULTS_VERSION:
            raise ValueError(f"{path.name} is not a version {RESULTS_VERSION} results file")
        return cls(dict(data["provider"]), dict(data["approvals"]), list(data["runs"]),
                   int(data.get("planned") or 0), str(data.get("stopped") or ""))


# -- text ------------------------------------------------------------------------------------------


def percent(value: float) -> str:
    return f"{100 * value:.0f}%"


def interval_text(tally: Tally) -> str:
    low, high = tally.interval
    return f"[{percent(low)}, {percent(high)}]"


def counts(counter: Counter[str] | dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(counter.items())) or "none"


def refusal_lines(tally: Tally) -> list[str]:
    return [f"{code}: hit {hits}, recovered {tally.recovered.get(code, 0)}" for code, hits in sorted(tally.refusals.items())]


def who_answered(results: SuiteResults) -> list[str]:
    """The header lines: which provider, labelled as what it is, and which policy approved."""
    provider, approvals = results.provider, results.approvals
    lines = [f"provider: {provider.get('label', provider.get('spec', '?'))} ({provider.get('kind', '?')})"
             + (f", model {provider['model']}" if provider.get("model") else "")]
    if provider.get("notice"):
        lines.append(f"  {provider['notice']}")
    lines.append(f"approvals: {approvals.get('policy', '?')}; shell tools {approvals.get('shell', '?')}")
    return lines


COLUMNS = ("task", "pass", "rate", "95% CI (Wilson)", "turns", "in tok", "out tok", "cost $", "wall s", "repairs", "failed checks")


def table_rows(results: SuiteResults) -> list[tuple[str, ...]]:
    """The table's rows (tasks, then ``overall``): the same cells for the terminal and the notebook."""
    rows: list[tuple[str, ...]] = []
    named = [*results.tasks().items(), ("overall", results.overall())]
    for name, tally in named:
        failed = ", ".join(f"{check}" + (f" x{n}" if n > 1 else "") for check, n in tally.failed_checks.most_common()) or "-"
        rows.append((name, f"{tally.passes}/{tally.runs}", percent(tally.rate), interval_text(tally), str(tally.turns),
                     str(tally.input_tokens), str(tally.output_tokens), f"{tally.cost_usd:.4f}", f"{tally.wall_s:.1f}",
                     str(tally.repairs), failed if name != "overall" else "-"))
    return rows


def to_text(results: SuiteResults) -> str:
    """The results as a terminal table, with the header saying who answered and the counters below."""
    rows = [COLUMNS, *table_rows(results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS) - 1)]
    lines = [*who_answered(results), ""]
    for index, row in enumerate(rows):
        if index == len(rows) - 1:
            lines.append("-" * (sum(widths) + 2 * len(widths) + 13))
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1])
    overall = results.overall()
    lines += ["", f"pass rate {overall.passes}/{overall.runs} = {percent(overall.rate)}, {INTERVAL} {interval_text(overall)}",
              f"tool calls: {counts(overall.tool_calls)}",
              "refusals by code: " + ("; ".join(refusal_lines(overall)) or "none"),
              f"Phase 3 repair rounds: {overall.repairs}; runs ended: {counts(overall.ended)}",
              f"cards: {counts(overall.approvals)} ('auto' is the {results.approvals.get('policy', '?').split(':')[0]} policy)",
              *replay_notes(results), *stop_note(results)]
    return "\n".join(lines)


def replay_notes(results: SuiteResults) -> list[str]:
    """Where a replayed run's requests first differed from its recording (a prompt or a tool changed)."""
    return [f"replay note: {run['task_id']} r{run.get('repeat', 1)}: {run['replay_note']}"
            for run in results.runs if run.get("replay_note")]


def stop_note(results: SuiteResults) -> list[str]:
    """A suite that ended early says so under its table: the rates above cover only the runs that finished."""
    if not results.stopped:
        return []
    return [f"stopped after {len(results.runs)} of {results.planned or len(results.runs)} planned runs: {results.stopped}"]
