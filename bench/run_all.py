"""``make bench``: run every ``bench/bench_*.py``, gather their figures, print one table.

Each script runs in its own subprocess with a timeout; a script that fails, times out or
prints no ``BENCH-FIGURES`` line is reported as such and the others still run. Each script's
result (with the date and load average of its own run) replaces its earlier one in
``bench/results.json`` (``record.py``); ``bench/RESULTS.md`` is rendered from that whole record
(``report.py``), so ``--only search`` re-measures search and keeps every other script's rows and
dates. Each script's full output is kept in a log folder whose path is printed.

Run: ``.venv/bin/python bench/run_all.py [--only edits,search] [--timeout S] [--no-write] [--render]``
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
from pathlib import Path

import record
import report
from common import collect, collect_tables
from record import ScriptResult

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
DEFAULT_TIMEOUT_S = 1200.0
TIMEOUTS_S = {"bench_test_api.py": 1800.0, "bench_shell.py": 1800.0, "bench_concurrency.py": 2400.0,
              "bench_hub_capacity.py": 900.0, "bench_export.py": 1800.0, "bench_eval.py": 5400.0}
MAX_LOG_LINES = 60
RECORD = BENCH / "results.json"
RESULTS = BENCH / "RESULTS.md"


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
        "date": _now(),
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


def run_script(path: Path, timeout: float, logs: Path) -> ScriptResult:
    """One script in its own interpreter; its output goes to a log, its figures are parsed."""
    log = logs / f"{path.stem}.log"
    measured, before = _now(), record.load_average()
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
    after = record.load_average()
    load = f"{before:.1f} -> {after:.1f}" if before is not None and after is not None else ""
    text = log.read_text(encoding="utf-8", errors="replace")
    result = ScriptResult(path.name, "ok", seconds, measured, load, machine())
    try:
        figures, result.tables = collect(text), collect_tables(text)
        result.status = _status(code, timeout, figures is not None)
    except ValueError as exc:  # a malformed figures line is a failure of that script, said so
        result.status, figures = f"unreadable figures ({exc})", None
    if figures is None:
        result.output_tail = text.rstrip().splitlines()[-MAX_LOG_LINES:]
    for fig in figures or []:
        fig.group = fig.group or path.stem.removeprefix("bench_")
    result.figures = figures or []
    return result


def _status(code: int | None, timeout: float, collected: bool) -> str:
    if code is None:
        return f"timed out after {timeout:.0f} s"
    if code != 0:
        return f"failed (exit {code})"
    return "ok" if collected else "not collected (no BENCH-FIGURES line)"


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated topics (edits,search,...); the others' rows are kept")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per script (default: per script)")
    parser.add_argument("--no-write", action="store_true", help="do not write bench/results.json and bench/RESULTS.md")
    parser.add_argument("--render", action="store_true", help="measure nothing: write RESULTS.md from bench/results.json")
    args = parser.parse_args(argv)
    scripts = [] if args.render else sorted(BENCH.glob("bench_*.py"))
    if args.only:
        wanted = {f"bench_{t.strip()}.py" for t in args.only.split(",") if t.strip()}
        unknown = sorted(wanted - {s.name for s in scripts})
        if unknown:
            parser.error(f"no such bench script: {', '.join(unknown)}")
        scripts = [s for s in scripts if s.name in wanted]
    try:
        kept = [r for r in record.load(RECORD) if (BENCH / r.name).exists()]  # a script removed takes its rows along
    except ValueError as exc:
        parser.error(str(exc))
    logs = Path(tempfile.mkdtemp(prefix="besser-bench-logs-")) if scripts else None
    print(f"{len(scripts)} bench scripts" + (f"; full outputs in {logs}" if logs else ""), flush=True)
    runs = []
    for i, script in enumerate(scripts, 1):
        timeout = args.timeout or TIMEOUTS_S.get(script.name, DEFAULT_TIMEOUT_S)
        print(f"[{i}/{len(scripts)}] {script.name} ...", end=" ", flush=True)
        assert logs is not None
        run = run_script(script, timeout, logs)
        runs.append(run)
        print(f"{run.status} ({run.seconds:.0f} s, {len(run.figures)} figures)", flush=True)
        if run.status != "ok":
            tail = (run.output_tail or (logs / f"{script.stem}.log").read_text(errors="replace").splitlines())[-5:]
            print("    last lines: " + "\n    ".join(tail), flush=True)
    table = report.rows(runs)
    print()
    print(report.text_table(table))
    missed = report.misses(runs)
    left = [r.name for r in runs if r.status != "ok"]
    print(f"\n{len(table)} figures; {sum(r[-1] == 'yes' for r in table)} targets met, {len(missed)} missed"
          + (f"; not collected or failed: {', '.join(left)}" if left else ""))
    unexplained = [f"{f.group} / {f.name}" for f, why in missed if why == report.NO_REASON]
    if unexplained:
        print(f"missed with no measured reason in their script: {'; '.join(unexplained)}")
    if not args.no_write:
        merged = record.merge(kept, runs)
        record.save(RECORD, merged)
        RESULTS.write_text(report.markdown(merged, machine()), encoding="utf-8")
        print(f"wrote {RECORD} and {RESULTS} ({len(runs)} of {len(merged)} scripts measured now)")
    return 1 if any(r.status.startswith(("failed", "timed out", "unreadable")) for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
