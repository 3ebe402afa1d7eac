"""Each loop guard triggered by an authored script (a scripted provider, labelled as such)."""

from __future__ import annotations

import asyncio

import pytest

from kernel_ext.boundary import ExecutionPolicy, Executor, always_approve
from kernel_ext.hosting.bus import EventLog
from kernel_ext.pipeline.guards import Budgets, EditChurn
from kernel_ext.pipeline.loop import LoopGuards, _take_call, customize
from kernel_ext.providers.messages import Conversation, ToolUse
from kernel_ext.providers.scripted import Script, ScriptedProvider, Turn, call
from kernel_ext.tools.base import Category, ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.tools.task_list import TaskList
from kernel_ext.workspace import Workspace
from pipeline_helpers import events_of, run_pipeline


def harness(tmp_path, turns, *, max_turns=20, churn_limit=5, tasks=None):
    tasks = tasks or TaskList()
    ctx = ToolContext(services={"workspace": Workspace(tmp_path), "task_list": tasks})
    executor = Executor(default_catalog(), ctx, policy=ExecutionPolicy.allowing([Category.EDIT, Category.PLAN]), approver=always_approve)
    events = EventLog("r1")
    conversation = Conversation(system="test")
    conversation.user("do the thing")
    guards = LoopGuards(Budgets(max_turns=max_turns), EditChurn(limit=churn_limit))
    provider = ScriptedProvider(Script.of("guards", turns))
    result = asyncio.run(customize(provider, conversation, executor, events, tasks, guards))
    return result, events, conversation, tasks


def test_declaring_victory_with_open_tasks_is_refused(tmp_path):
    tasks = TaskList()
    tasks.add("write the module", origin="request")
    result, events, conversation, _ = harness(tmp_path, [Turn("All done!")] * 4, tasks=tasks)
    assert result.stop == "unfinished" and "T1 write the module" in result.reason
    refusals = [m for m in conversation.messages if m.role == "user" and m.text.startswith("[host] Not done yet")]
    assert len(refusals) == 3


def test_victory_is_accepted_when_every_open_task_is_blocked_with_a_reason(tmp_path):
    """An honest "this cannot be done" ends the loop at once (the run itself still ends blocked)."""
    tasks = TaskList()
    tasks.add("add the borrowing history", origin="request")
    turns = [Turn("", (call("task_list", {"action": "blocked", "blocked": [{"id": "T1", "reason": "the model has no loan dates"}]}),)),
             Turn("This cannot be done on this model.")]
    result, _, conversation, _ = harness(tmp_path, turns, tasks=tasks)
    assert result.stop == "finished" and result.turns == 2
    assert not [m for m in conversation.messages if m.role == "user" and m.text.startswith("[host] Not done yet")]
    assert [t.status for t in tasks.open_tasks()] == ["blocked"]  # still required: the run's ending says so


def test_a_blocked_task_does_not_excuse_another_open_one(tmp_path):
    tasks = TaskList()
    tasks.add("add the borrowing history", origin="request")
    tasks.add("add the loan dates", origin="request")
    turns = [Turn("", (call("task_list", {"action": "blocked", "blocked": [{"id": "T1", "reason": "no loan dates"}]}),)),
             *[Turn("Done.")] * 4]
    result, _, _, _ = harness(tmp_path, turns, tasks=tasks)
    assert result.stop == "unfinished" and "T2 add the loan dates" in result.reason and "T1" not in result.reason


def test_victory_is_accepted_once_work_is_proven(tmp_path):
    tasks = TaskList()
    tasks.add("write the module", origin="request")
    turns = [
        Turn("", (call("write_file", {"path": "mod.py", "content": "VALUE = 1\n"}),)),
        Turn("", (call("task_list", {"action": "done", "id": "T1", "evidence": [{"id": "T1", "path": "mod.py", "quote": "VALUE = 1"}]}),)),
        Turn("Finished."),
    ]
    result, events, _, _ = harness(tmp_path, turns, tasks=tasks)
    assert result.stop == "finished" and result.turns == 3
    assert events_of_type(events, "task_list")[-1].tasks[0]["status"] == "implemented"


def test_editing_one_file_over_and_over_is_refused(tmp_path):
    turns = [Turn("", (call("write_file", {"path": "loop.py", "content": f"N = {i}\n"}),)) for i in range(4)] + [Turn("stop")]
    result, events, _, _ = harness(tmp_path, turns, churn_limit=2)
    results = events_of_type(events, "tool_result")
    assert [r.ok for r in results] == [True, True, False, False]
    assert results[2].error_code == "edit_churn"
    assert (tmp_path / "loop.py").read_text() == "N = 1\n"  # nothing after the refusal was applied


def test_turn_budget_ends_the_run_with_a_named_event(tmp_path):
    turns = [Turn("", (call("list_files", {}),))] * 5
    result, events, _, _ = harness(tmp_path, turns, max_turns=2)
    assert result.stop == "budget" and "turn budget" in result.reason
    error = events_of_type(events, "error")[-1]
    assert error.code == "BUDGET" and error.terminal is False


def test_a_call_cut_off_by_the_output_limit_is_not_applied(tmp_path):
    tasks = TaskList()
    ctx = ToolContext(services={"workspace": Workspace(tmp_path), "task_list": tasks})
    executor = Executor(default_catalog(), ctx, policy=ExecutionPolicy.allowing([Category.EDIT]), approver=always_approve)
    events = EventLog("r1")
    cut = ToolUse("c1", "write_file", '{"path": "big.py", "content": "def f():\\n    return 1\\n', host_id="c1")
    result = asyncio.run(_take_call(cut, "max_tokens", executor, events, tasks, EditChurn()))
    assert result.error.code == "truncated_call" and "cut off" in result.observation
    assert not (tmp_path / "big.py").exists()
    assert events_of_type(events, "tool_result")[-1].error_code == "truncated_call"


def events_of_type(events: EventLog, type_: str):
    return [e for e in events.events if e.type == type_]


@pytest.mark.slow
def test_a_repair_that_makes_things_worse_is_rolled_back(tmp_path):
    turns = [
        Turn("", (call("submit_tasks", {"tasks": ["add a helper module"]}),)),
        Turn("", (call("write_file", {"path": "backend/helper.py", "content": "value = undefined_one\n"}),)),
        Turn("", (call("task_list", {"action": "done", "id": "T1",
                                     "evidence": [{"id": "T1", "path": "backend/helper.py", "quote": "value = undefined_one"}]}),)),
        Turn("Done."),
        # Phase 3 repair rounds that only add more undefined names
        Turn("", (call("write_file", {"path": "backend/helper2.py", "content": "a = missing_a\nb = missing_b\n"}),)),
        Turn("Fixed."),
        Turn("", (call("write_file", {"path": "backend/helper3.py", "content": "c = missing_c\nd = missing_d\n"}),)),
        Turn("Fixed again."),
    ]
    run, done = run_pipeline(tmp_path, "Generate a FastAPI backend with a helper module", turns)
    app = run.context.layout.app_dir / "backend"
    restored = [e for e in events_of(run, "snapshot") if e.action == "restored"]
    assert restored and restored[-1].snapshot_id == "phase3-start"
    assert (app / "helper.py").exists() and not (app / "helper2.py").exists() and not (app / "helper3.py").exists()
    validate = [e for e in events_of(run, "phase") if e.phase == "validate" and e.status == "done"][0]
    assert validate.details["rolled_back"] is True and validate.details["rounds"] == 2
    assert done.status == "blocked" and any("undefined_one" in b for b in done.blockers)
