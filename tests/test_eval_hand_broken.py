"""A verifier judges the app, never the agent's word: an app the oracle script built, broken by hand
in one requirement after the run, fails the check that requirement names, while the run's own record
(its events, its task list closed with evidence, its end status) still says the work was done.

The oracle runs are real (pipeline, BESSER's generator, sandboxed app hosts); the breaks are edits a
person makes to the produced files, each the kind of slip a model makes (a signature never checked,
the role read from an unsigned token, one line's stock left alone, an order committed before the
stock check). Each pristine copy passes first, so a failure below is the break's doing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from api_fixtures import requires_sandbox

from kernel_ext.eval.runner import run_task, verifier_host
from kernel_ext.eval.scripts import provider
from kernel_ext.eval.tasks import TASKS
from kernel_ext.eval.verify import Produced, verify

pytestmark = [pytest.mark.slow, requires_sandbox]

SIGNATURE_CHECK = "if not hmac.compare_digest(expected, _unb64(signature)):"
# task -> (file in app/, text the oracle wrote, the hand edit, the check that must fail)
BREAKS = {
    "library-jwt": [
        ("backend/deps.py", SIGNATURE_CHECK, "if False:", "protected_route_refuses_without_token"),
        ("backend/deps.py", 'raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing bearer token")', 'return "ada"',
         "protected_route_refuses_without_token"),
    ],
    "clinic-role-access": [
        ("backend/deps.py", SIGNATURE_CHECK, "if False:", "forged_admin_refused"),
        ("backend/roles.py", 'if claims.get("role") != "admin":', 'if claims.get("role") not in ("admin", "staff"):',
         "staff_forbidden"),
        ("backend/roles.py", "return {str(doctor): count for doctor, count in rows}",
         "return {str(doctor): len(rows) for doctor, count in rows}", "admin_reads_report"),
    ],
    "shop-place-order": [
        ("backend/routers/place_order.py", "product.stock -= line.quantity",
         "product.stock -= line.quantity if line is data.lines[0] else 0", "stock_reduced"),
        ("backend/routers/place_order.py", "database.flush()", "database.commit()", "short_stock_refused_atomically"),
    ],
}


@pytest.fixture(scope="module")
def eval_host():
    with verifier_host() as host:
        yield host


@pytest.fixture(scope="module")
def oracle_runs(tmp_path_factory, eval_host):
    """Each task's oracle run, made once; the tests break copies of it."""
    made: dict[str, Path] = {}

    def run(task_id: str) -> Path:
        if task_id not in made:
            task = TASKS[task_id]
            folder = tmp_path_factory.mktemp(task_id) / "run"
            outcome = run_task(task, provider(task.script("oracle")), folder, eval_host)
            assert outcome.passed, outcome.report.to_text()
            made[task_id] = folder
        return made[task_id]

    return run


def judge(task_id: str, run_dir: Path, host) -> tuple[bool, list[str]]:
    task = TASKS[task_id]
    done = json.loads((run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    report = verify(task.id, task.all_checks(), Produced(run_dir, host, task.model, str(done.get("status", ""))))
    return report.passed, report.failed


def agents_word(run_dir: Path) -> tuple[str, list[str]]:
    """What the run recorded: its end status, and the statuses of its last task list (the agent's claims)."""
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    lists = [e["tasks"] for e in events if e.get("type") == "task_list"]
    return str(events[-1].get("status")), [str(t["status"]) for t in (lists[-1] if lists else [])]


@pytest.mark.parametrize(("task_id", "index"), [(t, i) for t, breaks in BREAKS.items() for i in range(len(breaks))])
def test_a_requirement_broken_by_hand_fails_its_check(task_id, index, oracle_runs, eval_host, tmp_path):
    rel, old, new, must_fail = BREAKS[task_id][index]
    original = oracle_runs(task_id)
    broken = tmp_path / "broken"
    shutil.copytree(original, broken, symlinks=True)
    assert judge(task_id, broken, eval_host) == (True, [])  # the copy as the oracle left it passes
    target = broken / "app" / rel
    text = target.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{rel} no longer holds {old!r}: the oracle changed; update the break"
    target.write_text(text.replace(old, new), encoding="utf-8")

    passed, failed = judge(task_id, broken, eval_host)

    assert not passed and must_fail in failed, failed
    status, claims = agents_word(broken)
    assert status == "completed" and claims and set(claims) <= {"implemented", "verified"}  # it still claims success
