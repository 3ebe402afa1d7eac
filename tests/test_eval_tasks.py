"""The evaluation suite proves it discriminates, offline: for every task, the oracle script passes
its verifier, the null script ("done", no tool call) fails it, and the plausible wrong script fails
it with the check the task names. Real pipeline, real sandboxed app hosts; the providers are
authored scripts (labelled scripted), since no model runs here.

Every outcome is written to ``tests/artifacts/eval/outcomes.jsonl``;
``python -m kernel_ext.eval.table`` renders docs/eval.md from it.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from api_fixtures import requires_sandbox

from kernel_ext.eval.runner import run_task, verifier_host
from kernel_ext.eval.scripts import KINDS, provider
from kernel_ext.eval.tasks import TASKS

OUTCOMES = Path(__file__).parent / "artifacts" / "eval" / "outcomes.jsonl"
_write = threading.Lock()

pytestmark = [pytest.mark.slow, requires_sandbox]


@pytest.fixture(scope="session")
def eval_host():
    """One verifier app host for the session: each scenario still gets a fresh child and database."""
    with verifier_host() as host:
        yield host


@pytest.fixture(scope="session")
def outcomes_file():
    OUTCOMES.parent.mkdir(parents=True, exist_ok=True)
    OUTCOMES.write_text("", encoding="utf-8")
    return OUTCOMES


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("task_id", list(TASKS))
def test_verifier_discriminates(task_id, kind, tmp_path, eval_host, outcomes_file):
    task = TASKS[task_id]
    outcome = run_task(task, provider(task.script(kind)), tmp_path / "run", eval_host)
    with _write, outcomes_file.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"kind": kind, "model": task.model, "covers": task.covers, "wrong_does": task.wrong_does,
                              "wrong_fails": task.wrong_fails, **outcome.as_dict()}) + "\n")
    report = outcome.report.to_text()
    if kind == "oracle":
        assert outcome.passed, report
    elif kind == "null":
        assert not outcome.passed, report
    else:
        assert not outcome.passed and task.wrong_fails in outcome.report.failed, report
