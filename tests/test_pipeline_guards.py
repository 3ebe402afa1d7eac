"""Each loop guard, triggered on purpose."""

from __future__ import annotations

from kernel_ext.pipeline.guards import (
    Budgets,
    EditChurn,
    condense_context,
    estimate_tokens,
    truncated_call,
    victory_refusal,
)
from kernel_ext.providers.messages import Conversation, ToolUse


def long_conversation(results: int = 12, size: int = 4000) -> Conversation:
    conv = Conversation(system="sys")
    conv.user("Generate a FastAPI backend")
    for i in range(results):
        name = "task_list" if i == 0 else "read_file"
        conv.assistant("", [ToolUse(f"c{i}", name, '{"path": "x.py"}')])
        conv.tool_result(f"c{i}", name, f"result {i} " + "x" * size)
    return conv


def test_condense_shortens_old_results_but_keeps_plan_and_recent():
    conv = long_conversation()
    before = estimate_tokens(conv)
    changed = condense_context(conv, budget_tokens=before // 2, keep_recent=4)
    assert changed > 0 and estimate_tokens(conv) <= before // 2
    results = [m for m in conv.messages if m.role == "tool"]
    assert results[0].name == "task_list" and not results[0].content.startswith("[condensed")
    assert all(not m.content.startswith("[condensed") for m in results[-4:])
    assert conv.messages[0].text == "Generate a FastAPI backend"


def test_eviction_keeps_call_result_pairs_together():
    conv = long_conversation(results=10, size=100)
    condense_context(conv, budget_tokens=50, keep_recent=2)
    ids_called = {c.id for m in conv.messages if m.role == "assistant" for c in m.tool_calls}
    ids_answered = {m.call_id for m in conv.messages if m.role == "tool"}
    assert ids_called == ids_answered
    assert conv.messages[0].role == "user"


def test_within_budget_nothing_changes():
    conv = long_conversation(results=2, size=10)
    assert condense_context(conv, budget_tokens=10_000) == 0


def test_edit_churn_refuses_after_the_limit_and_resets_on_progress():
    churn = EditChurn(limit=2)
    args = {"path": "app/main.py"}
    for _ in range(2):
        assert churn.check("replace_file_lines", args) is None
        churn.record("replace_file_lines", args, ok=True)
    refusal = churn.check("modify_file", args)
    assert refusal and "app/main.py" in refusal and "not applied" in refusal
    assert churn.check("read_file", args) is None  # reading is always fine
    assert churn.check("modify_file", {"path": "other.py"}) is None
    churn.progress()
    assert churn.check("modify_file", args) is None


def test_failed_edits_do_not_count_as_churn():
    churn = EditChurn(limit=1)
    churn.record("modify_file", {"path": "a.py"}, ok=False)
    assert churn.check("modify_file", {"path": "a.py"}) is None


def test_victory_refused_while_work_is_open():
    assert victory_refusal([], []) is None
    message = victory_refusal(["T2 add JWT auth"], ["login-flow"])
    assert "T2 add JWT auth" in message and "login-flow" in message


def test_truncated_call_is_refused_only_when_cut_off():
    cut = ToolUse("c1", "write_file", '{"path": "auth.py", "content": "import jw')
    whole = ToolUse("c2", "write_file", '{"path": "auth.py", "content": "x"}')
    assert "cut off" in truncated_call(cut, "max_tokens")
    assert truncated_call(whole, "max_tokens") is None
    assert truncated_call(cut, "tool_use") is None  # a plain bad JSON is the boundary's invalid_json


def test_budgets_name_the_first_one_spent():
    assert Budgets().spent() is None
    assert "turn budget" in Budgets(max_turns=3, turns=3).spent()
    assert "token budget" in Budgets(max_tokens=10, tokens=11).spent()
    assert "cost cap" in Budgets(max_cost_usd=0.5, cost_usd=0.6).spent()
    assert "wall-time" in Budgets(max_runtime_s=0.0).spent()
    assert Budgets(max_turns=10, turns=4).turns_left() == 6
