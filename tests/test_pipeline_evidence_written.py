"""A checklist citation stands on what this run wrote (issue 19, item 9), through the real pipeline
with an authored (scripted) provider."""

from __future__ import annotations

from pipeline_helpers import Turn, call, events_of, run_pipeline

REQUIREMENTS = "backend/requirements.txt"


def _task_results(run):
    return [e for e in events_of(run, "tool_result") if e.name == "task_list"]


def test_quoting_an_untouched_line_of_an_edited_file_is_refused(tmp_path):
    untouched = {"id": "T1", "path": REQUIREMENTS, "quote": "fastapi>=0.103.0"}
    written = {"id": "T1", "path": REQUIREMENTS, "quote": "uvicorn>=0.30.0"}
    turns = [
        Turn("", (call("submit_tasks", {"tasks": ["raise the uvicorn floor"]}),)),
        Turn("", (call("modify_file", {"path": REQUIREMENTS, "old_text": "uvicorn>=0.15.0", "new_text": "uvicorn>=0.30.0"}),)),
        Turn("", (call("task_list", {"action": "done", "id": "T1", "evidence": [untouched]}),)),
        Turn("", (call("task_list", {"action": "done", "id": "T1", "evidence": [written]}),)),
        Turn("done"),
    ] + [Turn("cannot fix")] * 12
    run, done = run_pipeline(tmp_path, "Generate a FastAPI backend", turns)
    refused, accepted = _task_results(run)
    assert refused.error_code == "evidence_untouched" and "not on lines this run wrote" in refused.summary
    assert accepted.ok
    tasks = done.verification["tasks"]
    assert tasks[0]["status"] == "implemented" and tasks[0]["evidence"] == [written]
