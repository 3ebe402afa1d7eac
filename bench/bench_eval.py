"""The evaluation suite offline: its wall time on this machine, and each task's time to a verified app.

For every task of ``kernel_ext.eval.tasks`` (or those named with ``--tasks``) the three scripted
providers run through the real pipeline (``runner.run_task``: Phase 1, Phase 2 with the script,
Phase 3, then the verifier's HTTP scenarios on the verifier's own sandboxed app host), one
verifier host for the whole suite, as ``tests/test_eval_tasks.py`` does.

- ``suite wall``: the whole offline suite, every task's oracle, null and wrong script, once;
- ``<task> oracle to a verified app``: the oracle run plus its verifier, beside the baseline
  measured in the same run: the Phase-1-only time of the same model (``run_phase1`` with its
  output checks: what a person gets with no customisation at all, unverified).

Runs are not repeated (one pass of the suite is minutes); min and max are that one sample.
BESSER's agent is not driven beside it: its code path takes no scripted provider and has no
verifier (see docs/eval.md).

Run: ``.venv/bin/python bench/bench_eval.py [--tasks a,b] [--oracle-only]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from common import Figure, emit, emit_table, figure  # noqa: E402


def _phase1_seconds(model_key: str, folder: Path) -> float:
    from kernel_ext.eval.models import eval_model
    from kernel_ext.generation import run_phase1

    model = eval_model(model_key).load()
    started = time.perf_counter()
    result = run_phase1(model, folder, "fastapi_backend")
    elapsed = time.perf_counter() - started
    assert result.ok, result.findings
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="", help="comma-separated task ids (default: all)")
    parser.add_argument("--oracle-only", action="store_true", help="skip the null and wrong scripts (no suite figure)")
    args = parser.parse_args()

    from kernel_ext.eval.runner import run_task, verifier_host
    from kernel_ext.eval.scripts import KINDS, provider
    from kernel_ext.eval.tasks import TASKS, get_task

    tasks = [get_task(t.strip()) for t in args.tasks.split(",") if t.strip()] or list(TASKS.values())
    kinds = ("oracle",) if args.oracle_only else KINDS
    figures: list[Figure] = []
    rows = ["| task | model | oracle to a verified app (s) | Phase 1 only, same model (s) | ratio | null (s) | wrong (s) | as required |",
            "|---|---|---|---|---|---|---|---|"]
    suite_started = time.perf_counter()
    with verifier_host() as host, tempfile.TemporaryDirectory(prefix="bench-eval-") as tmp:
        for number, task in enumerate(tasks):
            seconds: dict[str, float] = {}
            verdicts: dict[str, bool] = {}
            baseline = _phase1_seconds(task.model, Path(tmp) / f"p1-{number}")
            for kind in kinds:
                started = time.perf_counter()
                outcome = run_task(task, provider(task.script(kind)), Path(tmp) / f"{number}-{kind}", host)
                seconds[kind] = time.perf_counter() - started
                verdicts[kind] = outcome.passed if kind == "oracle" else not outcome.passed
            ok = all(verdicts.values())
            print(f"{task.id:28} oracle {seconds['oracle']:6.1f} s  Phase 1 only {baseline:5.1f} s  "
                  + "  ".join(f"{k} {seconds[k]:5.1f} s" for k in kinds if k != "oracle")
                  + ("" if ok else f"  NOT AS REQUIRED {verdicts}"), flush=True)
            figures.append(figure(f"{task.id}: oracle to a verified app", [seconds["oracle"]], "s",
                                  baseline=("Phase 1 only, same model", [baseline]),
                                  note="" if ok else "an outcome was not as required"))
            rows.append(f"| `{task.id}` | {task.model} | {seconds['oracle']:.1f} | {baseline:.1f} | "
                        f"{seconds['oracle'] / baseline:.1f}x | {seconds.get('null', 0):.1f} | {seconds.get('wrong', 0):.1f} | "
                        f"{'yes' if ok else 'NO'} |")
    wall = time.perf_counter() - suite_started
    if not args.oracle_only:
        figures.insert(0, figure(f"offline suite wall ({len(tasks)} tasks x 3 scripts)", [wall], "s",
                                 note="one pass; includes the Phase 1 baselines measured beside it"))
    print(f"suite wall time: {wall:.0f} s for {len(tasks)} tasks x {len(kinds)} scripts")
    emit_table("Evaluation suite: per-task time to a verified app (one pass)", rows)
    emit(figures)


if __name__ == "__main__":
    main()
