"""The evaluation suite proves it discriminates, offline: for every task, the oracle script passes
its verifier, the null script ("done", no tool call) fails it, and the plausible wrong script fails
it with the check the task names. Real pipeline, real sandboxed app hosts; the providers are
authored scripts (labelled scripted), since no model runs here.

Every outcome is written to ``tests/artifacts/eval/outcomes.jsonl``, replacing that task's and script's
earlier row (so tasks run one at a time add up to the whole table; rows of tasks no longer in the
registry are dropped); ``python -m kernel_ext.eval.table`` renders docs/eval.md from it.
"""

from __future__ import annotations

import fcntl
import json
from pathlib import Path

import pytest
from api_fixtures import requires_sandbox

from kernel_ext.eval.runner import run_task, verifier_host
from kernel_ext.eval.scripts import KINDS, provider
from kernel_ext.eval.tasks import TASKS

OUTCOMES = Path(__file__).parent / "artifacts" / "eval" / "outcomes.jsonl"

pytestmark = [pytest.mark.slow, requires_sandbox]


@pytest.fixture(scope="session")
def eval_host():
    """One verifier app host for the session: each scenario still gets a fresh child and database."""
    with verifier_host() as host:
        yield host


def record(row: dict) -> None:
    """``row`` replaces the file's row of the same task and script (under a file lock: runs may overlap)."""
    OUTCOMES.parent.mkdir(parents=True, exist_ok=True)
    with (OUTCOMES.parent / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        old = OUTCOMES.read_text(encoding="utf-8").splitlines() if OUTCOMES.exists() else []
        rows = [json.loads(line) for line in old if line.strip()]
        kept = [r for r in rows if r.get("task_id") in TASKS and (r["task_id"], r["kind"]) != (row["task_id"], row["kind"])]
        order = {(t, k): i for i, (t, k) in enumerate((t, k) for t in TASKS for k in KINDS)}
        kept = sorted([*kept, row], key=lambda r: order[(r["task_id"], r["kind"])])
        OUTCOMES.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("task_id", list(TASKS))
def test_verifier_discriminates(task_id, kind, tmp_path, eval_host):
    task = TASKS[task_id]
    outcome = run_task(task, provider(task.script(kind)), tmp_path / "run", eval_host)
    record({"kind": kind, "model": task.model, "covers": task.covers, "wrong_does": task.wrong_does,
            "wrong_fails": task.wrong_fails, **outcome.as_dict()})
    report = outcome.report.to_text()
    if kind == "oracle":
        assert outcome.passed, report
    elif kind == "null":
        assert not outcome.passed, report
    else:
        assert not outcome.passed and task.wrong_fails in outcome.report.failed, report
