"""Validation after a batch of writes: a model turn with several writes is
checked once, together, and the findings reach the model with that turn's results. Through the
real pipeline with an authored (scripted) provider; the requests it receives are kept to read."""

from __future__ import annotations

from pipeline_helpers import Turn, call, events_of, recording, run_pipeline

from kernel_ext.providers.messages import ToolResultMessage

HELPERS = "import no_such_module_zz\nfrom models_zz import Thing\n\n\ndef helper():\n    return no_such_module_zz.VALUE\n"


def _results(request):
    return [m for m in request.messages if isinstance(m, ToolResultMessage)]


def test_a_turn_of_several_writes_is_checked_once_and_the_model_reads_the_findings(tmp_path):
    seen = []
    turns = [
        Turn("", (call("submit_tasks", {"tasks": ["add helpers"]}),)),
        Turn("two files", (call("write_file", {"path": "backend/helpers.py", "content": HELPERS}),
                           call("write_file", {"path": "backend/models_zz.py", "content": "class Thing:\n    pass\n"}),
                           call("write_file", {"path": "backend/settings.json", "content": "{\"debug\": tru"}))),
        Turn("one file", (call("write_file", {"path": "backend/single.py", "content": "import no_such_module_zz\n"}),)),
        Turn("", (call("task_list", {"action": "blocked", "id": "T1", "reason": "scripted"}),)),
        Turn("done"),
    ] + [Turn("cannot fix")] * 12
    run, _done = run_pipeline(tmp_path, "Generate a FastAPI backend", recording(turns, seen))
    after_batch = _results(seen[2])[-3:]  # the request right after the three-write turn
    assert [m.name for m in after_batch] == ["write_file"] * 3
    assert "[host] checked the" not in after_batch[0].content and "[host] checked the" not in after_batch[1].content
    note = after_batch[2].content
    assert "[host] checked the 3 files this turn wrote, together: 2 findings" in note
    assert "missing module: no_such_module_zz (imported by backend/helpers.py" in note
    assert "models_zz" not in note.split("[host]", 1)[1]  # written in the same batch: it resolves
    assert "syntax error in backend/settings.json (json)" in note
    single = _results(seen[3])[-1]
    assert single.name == "write_file" and "[host] checked" not in single.content  # one write: its own gates only
    found = [f for f in events_of(run, "finding") if f.source == "batch-check"]
    assert {f.path for f in found} == {"backend/helpers.py", "backend/settings.json"}
