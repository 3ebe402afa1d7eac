"""``bench/RESULTS.md`` and the console table, rendered from the record (``record.py``).

Sections: the machine; the scripts, each with the date and load average of its own run (a
partial ``--only`` run leaves the others' rows and dates as they were); the tracked issue's
figures with their targets (``tracked.py``); the misses, each with its measured reason (a miss
whose script gives none is said so, never left blank); every figure; the notes; the scripts' own
tables. Everything in it comes from the scripts' output, so regenerating it loses no note.
"""

from __future__ import annotations

from collections.abc import Iterable

import tracked
from common import Figure
from record import ScriptResult

HEADER = ["group", "figure", "median", "min-max", "baseline (same run) median", "ratio", "BESSER 8.4.1", "target", "met"]
NO_REASON = "no measured reason: its script gives none (measure where the time goes and put it in the script's `miss`)"
MACHINE_KEYS = ("nproc", "cpu", "memory", "kernel", "python", "besser", "bwrap", "ripgrep")


def _num(value: float | None) -> str:
    if value is None:
        return ""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.1f}"
    return f"{value:.2f}" if abs(value) >= 1 else f"{value:.3f}"


def row(f: Figure) -> list[str]:
    ratio = f"{f.ratio:.2f}x" if f.ratio is not None else ""
    base = f"{f.baseline} {_num(f.baseline_median)}" if f.baseline else ""
    besser = f"{_num(f.besser)} ({f.besser_name})" if f.besser is not None else ""
    if f.besser_ratio is not None and f.target and f.target.endswith("BESSER"):
        besser += f" = {f.besser_ratio:.2f}x"
    met = {True: "yes", False: "NO", None: ""}[f.met]
    return [f.group, f.name, f"{_num(f.median)} {f.unit}", f"{_num(f.min)}-{_num(f.max)}", base, ratio, besser, f.target or "", met]


def rows(results: Iterable[ScriptResult]) -> list[list[str]]:
    return [row(f) for r in results for f in r.figures]


def text_table(table: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [HEADER, *table]) for i in range(len(HEADER))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(HEADER, widths, strict=True)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in table]
    return "\n".join(lines)


def misses(results: Iterable[ScriptResult]) -> list[tuple[Figure, str]]:
    """Every missed figure with its reason: the script's ``miss``, else its note, else ``NO_REASON``."""
    return [(f, f.miss or f.note or NO_REASON) for r in results for f in r.figures if f.met is False]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], body: Iterable[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(_cell(c) for c in r) + " |" for r in body)]


def _tracked(results: list[ScriptResult]) -> list[str]:
    found = {(f.group, f.name): (f, r) for r in results for f in r.figures}
    body = []
    for t in tracked.FIGURES:
        hit = found.get((t.group, t.figure))
        if hit is None:
            body.append([t.item, f"{t.group} / {t.figure}", "absent: not in this record (its script not run, or failed)",
                         "", t.target, "", "", ""])
            continue
        f, r = hit
        base = f"{f.baseline} {_num(f.baseline_median)} ({f.ratio:.2f}x)" if f.baseline and f.ratio is not None else ""
        if f.besser is not None and f.besser_ratio is not None:
            base += ("; " if base else "") + f"BESSER {_num(f.besser)} ({f.besser_ratio:.2f}x)"
        unjudged = "not judged (no BESSER or baseline figure)" if f.target else \
            "NOT JUDGED: the row has no target" if t.target[:1] in "<>" else "reported"
        met = {True: "yes", False: "NO (see Misses)", None: unjudged}[f.met]
        body.append([t.item, f"{t.group} / {t.figure}", f"{_num(f.median)} {f.unit}", base, t.target, f.target or "", met,
                     r.measured])
    return ["", f"## {tracked.ISSUE}", "",
            *_table(["item", "figure", "median", "beside (same run)", "issue's target", "row's target", "met", "measured"], body)]


def _machine(results: list[ScriptResult], current: dict[str, str]) -> list[str]:
    out = ["## Machine", "", *[f"- {k}: {v}" for k, v in current.items() if k != "date"],
           f"- RESULTS.md written: {current.get('date', '')} (each script's own date is in the next table)"]
    other = [r.name for r in results if r.machine and any(r.machine.get(k) != current.get(k) for k in MACHINE_KEYS)]
    if other:
        out.append(f"- measured on another machine (their own in results.json): {', '.join(other)}")
    return out


def markdown(results: list[ScriptResult], current: dict[str, str]) -> str:
    out = ["# Benchmark results", "",
           "Written by `make bench` (`bench/run_all.py`) from `bench/results.json`. Every figure is a median with",
           "min-max over its samples, beside a baseline measured in the same run on the same machine; ratio = median /",
           "baseline. BESSER 8.4.1 figures are measured in the same run where its code path can be driven. Each script's",
           "row says when it ran and the load average around it: `run_all.py --only X` re-measures X and keeps the rest.",
           "", *_machine(results, current)]
    out += ["", "## Scripts", "", *_table(["script", "status", "seconds", "figures", "measured", "load 1 min"],
                                          ([r.name, r.status, f"{r.seconds:.0f}", str(len(r.figures)), r.measured, r.load]
                                           for r in results))]
    out += _tracked(results)
    missed = misses(results)
    out += ["", "## Misses", "", "Each figure that misses its target, with the measured reason its script gives.", ""]
    out += [f"- {f.group} / {f.name}: {_num(f.median)} {f.unit} against {f.target}: {why}" for f, why in missed] or ["- none"]
    out += ["", "## Figures", "", *_table(HEADER, rows(results))]
    notes = [(f.group, f.name, f.note) for r in results for f in r.figures if f.note]
    if notes:
        out += ["", "## Notes", ""] + [f"- {g} / {n}: {text}" for g, n, text in notes]
    for r in results:
        for table in r.tables:
            out += ["", f"## {table['title']} ({r.name})", "", *table["lines"]]
    for r in results:
        if r.output_tail:
            out += ["", f"## {r.name}: its own output (figures not machine-readable, so not in the table)", "",
                    "```", *r.output_tail, "```"]
    return "\n".join(out) + "\n"
