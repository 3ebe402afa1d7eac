"""``make bench``: run every ``bench/bench_*.py``, gather their figures, print one table.

Each script runs in its own subprocess with a timeout; a script that fails, times out or
prints no ``BENCH-FIGURES`` line is reported as such and the others still run. The table
(and the machine it was measured on) is written to ``bench/RESULTS.md``; each script's full
output is kept in a log folder whose path is printed.

Run: ``.venv/bin/python bench/run_all.py [--only edits,search] [--timeout S] [--no-write]``
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import Figure, collect, collect_tables

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
DEFAULT_TIMEOUT_S = 1200.0
TIMEOUTS_S = {"bench_test_api.py": 1800.0, "bench_shell.py": 1800.0, "bench_concurrency.py": 2400.0,
              "bench_hub_capacity.py": 900.0, "bench_export.py": 1800.0, "bench_eval.py": 5400.0}
MAX_LOG_LINES = 60


@dataclass
class ScriptRun:
    name: str
    status: str  # ok | failed (exit N) | timed out | not collected
    seconds: float
    figures: list[Figure] = field(default_factory=list)
    log: Path | None = None
    tail: str = ""
    tables: list[dict] = field(default_factory=list)  # the script's own tables (``emit_table``)


def machine() -> dict[str, str]:
    """What the figures were measured on: CPUs, memory, kernel, Python, tools, date."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": str(cpus),
        "cpu": _cpu_model(),
        "memory": memory,
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "besser": _version("besser"),
        "bwrap": _tool_version(["bwrap", "--version"]),
        "ripgrep": _tool_version(["rg", "--version"]),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def _tool_version(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        return "not installed"
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr).strip() else "unknown"


def run_script(path: Path, timeout: float, logs: Path) -> ScriptRun:
    """One script in its own interpreter; its output goes to a log, its figures are parsed."""
    log = logs / f"{path.stem}.log"
    started = time.monotonic()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BESSER_AGENT_")}
    with open(log, "w", encoding="utf-8") as out:
        try:
            done = subprocess.run([sys.executable, str(path)], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=timeout, env=env, check=False)
            code = done.returncode
        except subprocess.TimeoutExpired:
            code = None
    seconds = time.monotonic() - started
    text = log.read_text(encoding="utf-8", errors="replace")
    tail = "\n".join(text.strip().splitlines()[-5:])
    try:
        figures, tables = collect(text), collect_tables(text)
    except ValueError as exc:  # a malformed figures line is a failure of that script, said so
        return ScriptRun(path.name, f"unreadable figures ({exc})", seconds, [], log, tail)
    if code is None:
        status = f"timed out after {timeout:.0f} s"
    elif code != 0:
        status = f"failed (exit {code})"
    elif figures is None:
        status = "not collected (no BENCH-FIGURES line)"
    else:
        status = "ok"
    for fig in figures or []:
        fig.group = fig.group or path.stem.removeprefix("bench_")
    return ScriptRun(path.name, status, seconds, figures or [], log, tail, tables)


def _num(value: float | None) -> str:
    if value is None:
        return ""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.1f}"
    return f"{value:.2f}" if abs(value) >= 1 else f"{value:.3f}"


def rows(runs: list[ScriptRun]) -> list[list[str]]:
    out = []
    for run in runs:
        for f in run.figures:
            ratio = f"{f.ratio:.2f}x" if f.ratio is not None else ""
            base = f"{f.baseline} {_num(f.baseline_median)}" if f.baseline else ""
            besser = f"{_num(f.besser)} ({f.besser_name})" if f.besser is not None else ""
            met = {True: "yes", False: "NO", None: ""}[f.met]
            out.append([f.group, f.name, f"{_num(f.median)} {f.unit}", f"{_num(f.min)}-{_num(f.max)}", base, ratio,
                        besser, f.target or "", met])
    return out


HEADER = ["group", "figure", "median", "min-max", "baseline (same run) median", "ratio", "BESSER 8.4.1", "target", "met"]


def text_table(table: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [HEADER, *table]) for i in range(len(HEADER))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(HEADER, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in table]
    return "\n".join(lines)


def markdown(table: list[list[str]], runs: list[ScriptRun], info: dict[str, str]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    out = ["# Benchmark results", "",
           "Written by `make bench` (`bench/run_all.py`). Every figure is a median with min-max over its",
           "samples, beside a baseline measured in the same run on the same machine; ratio = median / baseline.",
           "BESSER 8.4.1 figures are measured in the same run where its code path can be driven.", "",
           "## Machine", ""]
    out += [f"- {k}: {v}" for k, v in info.items()]
    out += ["", "## Scripts", "", "| script | status | seconds | figures |", "|---|---|---|---|"]
    out += [f"| {r.name} | {cell(r.status)} | {r.seconds:.0f} | {len(r.figures)} |" for r in runs]
    out += ["", "## Figures", "", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in table]
    notes = [(f.group, f.name, f.note) for r in runs for f in r.figures if f.note]
    if notes:
        out += ["", "## Notes", ""] + [f"- {g} / {n}: {text}" for g, n, text in notes]
    for run in runs:
        for table in run.tables:
            out += ["", f"## {table['title']} ({run.name})", "", *table["lines"]]
    for run in runs:
        if run.status.startswith("not collected") and run.log is not None:
            lines = run.log.read_text(encoding="utf-8", errors="replace").rstrip().splitlines()
            out += ["", f"## {run.name}: its own output (figures not machine-readable, so not in the table)", "",
                    "```", *lines[-MAX_LOG_LINES:], "```"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated topics (edits,search,...)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per script (default: per script)")
    parser.add_argument("--no-write", action="store_true", help="do not write bench/RESULTS.md")
    args = parser.parse_args(argv)
    scripts = sorted(BENCH.glob("bench_*.py"))
    if args.only:
        wanted = {f"bench_{t.strip()}.py" for t in args.only.split(",") if t.strip()}
        scripts = [s for s in scripts if s.name in wanted]
    logs = Path(tempfile.mkdtemp(prefix="besser-bench-logs-"))
    print(f"{len(scripts)} bench scripts; full outputs in {logs}", flush=True)
    runs = []
    for i, script in enumerate(scripts, 1):
        timeout = args.timeout or TIMEOUTS_S.get(script.name, DEFAULT_TIMEOUT_S)
        print(f"[{i}/{len(scripts)}] {script.name} ...", end=" ", flush=True)
        run = run_script(script, timeout, logs)
        runs.append(run)
        print(f"{run.status} ({run.seconds:.0f} s, {len(run.figures)} figures)", flush=True)
        if run.status != "ok":
            print("    last lines: " + run.tail.replace("\n", "\n    "), flush=True)
    table = rows(runs)
    print()
    print(text_table(table))
    missed = [r for r in table if r[-1] == "NO"]
    left = [r.name for r in runs if r.status != "ok"]
    print(f"\n{len(table)} figures; {sum(r[-1] == 'yes' for r in table)} targets met, {len(missed)} missed"
          + (f"; not collected or failed: {', '.join(left)}" if left else ""))
    if not args.no_write:
        (BENCH / "RESULTS.md").write_text(markdown(table, runs, machine()), encoding="utf-8")
        print(f"wrote {BENCH / 'RESULTS.md'}")
    return 1 if any(r.status.startswith(("failed", "timed out", "unreadable")) for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
