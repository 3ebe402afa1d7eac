"""The evaluation suite's registry, checked without running anything: each task's wrong script must
fail a check the task really makes, and the suite covers what issue 29 asks for (15+ tasks, 4+ models)."""

from __future__ import annotations

from kernel_ext.eval.models import MODELS
from kernel_ext.eval.scripts import KINDS
from kernel_ext.eval.tasks import TASKS


def test_every_wrong_script_names_a_check_of_its_task():
    for task in TASKS.values():
        names = [check.name for check in task.all_checks()]
        assert task.wrong_fails in names, (task.id, task.wrong_fails, names)
        assert len(names) == len(set(names)), (task.id, names)  # a failed check is named once


def test_the_suite_spans_fifteen_tasks_over_four_models_in_their_own_forms():
    assert len(TASKS) >= 15
    used = {task.model for task in TASKS.values()}
    assert used <= set(MODELS) and len(used) >= 4
    assert {MODELS[m].form for m in used} >= {"json", "plantuml", "python"}


def test_every_script_is_made_from_the_task_alone():
    for task in TASKS.values():
        for kind in KINDS:
            script = task.script(kind)
            assert script.turns, (task.id, kind)
