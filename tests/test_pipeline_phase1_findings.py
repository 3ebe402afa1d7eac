"""Phase 1's findings reach Phase 2: what the output checks found is in the
model's first customisation message and in the gap plan's scaffold, bounded. Through the real
pipeline with an authored (scripted) provider whose received requests are kept."""

from __future__ import annotations

from besser.BUML.metamodel.structural import Method, StringType
from pipeline_helpers import Turn, call, recording, run_pipeline

from kernel_ext.findings import Finding
from kernel_ext.model.loading import load_model
from kernel_ext.pipeline import prompts
from kernel_ext.providers.messages import UserMessage

BODY = "def shelf(self):\n    import no_such_module_zz\n    return no_such_module_zz.where(self)\n"


def _first_user(request):
    return next(m for m in request.messages if isinstance(m, UserMessage)).text


def test_the_first_customisation_message_carries_phase1_findings(tmp_path):
    model = load_model("example:library")
    model.get_class_by_name("Book").add_method(Method(name="shelf", type=StringType, code=BODY))
    seen = []
    turns = [Turn("", (call("submit_tasks", {"tasks": ["look at the scaffold"]}),)),
             Turn("", (call("task_list", {"action": "blocked", "id": "T1", "reason": "scripted"}),)),
             Turn("done")] + [Turn("cannot fix")] * 12
    run_pipeline(tmp_path, "Generate a FastAPI backend", recording(turns, seen), model=model)
    plan, first = _first_user(seen[0]), _first_user(seen[1])
    assert first.startswith("Generate a FastAPI backend\n\n[host] Phase 1's output checks found 2 issue(s)")
    assert "- [warning] phase1.imports: missing module: no_such_module_zz" in first
    assert "(backend/sql_alchemy.py:" in first and "phase1.app_import" in first
    assert "missing module: no_such_module_zz" in plan.split("Scaffold:", 1)[1]  # the gap plan sees them too


def test_a_clean_scaffold_says_so_and_many_findings_are_bounded():
    assert "found nothing to report" in prompts.first_message("r", [])
    assert prompts.first_message("r", None) == "r"  # Phase 1 did not run (a modify run on an unchanged model)
    many = [Finding("warning", "phase1.imports", f"missing module: m{i} " + "x" * 2000, "a.py", i) for i in range(40)]
    text = prompts.first_message("r", many)
    assert "found 40 issue(s)" in text and "... and 28 more" in text and "m12 " not in text
    assert len(text) < prompts.FINDINGS_SHOWN * (prompts.FINDING_CHARS + 200)
