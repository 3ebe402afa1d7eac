"""The reading part of an export (``hosting/export/sections.py``), one section at a time, on the real
demo run's record changed one event at a time: the words and table a reader sees, each decided
call as its card showed it and who decided it, the findings, the request reports, who wrote which
file."""

from __future__ import annotations

import time

import pytest
from export_fixtures import RUN_ID, demo_run, run_copy  # noqa: F401

from kernel_ext.hosting.events import CostEvent, RunStarted
from kernel_ext.hosting.export import sections
from kernel_ext.hosting.export.record import RunRecord, read_run


def changed(record: RunRecord, event, **update) -> RunRecord:
    """``record`` with ``event`` replaced by a copy carrying ``update``."""
    new = event.model_copy(update=update)
    record.events = [new if e is event else e for e in record.events]
    return record


def only(cells: list[tuple[str, str]]) -> str:
    assert [kind for kind, _ in cells] == ["markdown"]
    return cells[0][1]


def first(record: RunRecord, type_: str, **fields):
    return next(e for e in record.of_type(type_) if all(getattr(e, k) == v for k, v in fields.items()))


def table(text: str) -> dict[str, str]:
    rows = [line for line in text.split("\n") if line.startswith("| ") and line != "| | |"]
    return dict(tuple(part.strip() for part in line.strip("|").split("|", 1)) for line in rows)


# -- the overview ------------------------------------------------------------------------------


def test_the_overview_names_the_run_its_exporter_and_every_row(run_copy):  # noqa: F811
    record = read_run(run_copy)
    record = changed(record, record.events[0], ts=1_000_000_000.25)
    last = record.of_type("cost")[-1]
    record = changed(record, last, input_tokens=1200, output_tokens=345, cost_usd=0.123456)
    head = only(sections.overview(record, "1.2.3"))
    assert head.startswith(f"# Run `{RUN_ID}`\n\nExported by `%besser export` (besser-jupyter-agent 1.2.3). It shows "
                           "the model as code, the request, the timeline, each decided call with who decided it, the "
                           "findings, the request reports and who wrote which file. Its last cells re-run the "
                           "generation offline, from the provider turns the run recorded, into a fresh folder.\n\n"
                           "| | |\n|---|---|\n| status | completed |\n")
    rows = table(head)
    assert rows == {
        "status": "completed", "summary": record.done.summary.replace("|", "\\|"), "model": "Library",
        "generator": "fastapi\\_backend (rules)", "provider": "replay:library-jwt.cassette.jsonl (replay)",
        "sandbox": "bwrap", "shell tools": "off", "started": "2001-09-09 01:46:40 UTC",
        "cost": f"{len(record.of_type('cost'))} provider turns, 1200 input / 345 output tokens, $0.1235",
    }
    assert list(rows) == ["status", "summary", "model", "generator", "provider", "sandbox", "shell tools", "started",
                          "cost"]


def test_the_overview_of_a_run_that_never_said_how_or_who(run_copy):  # noqa: F811
    record = read_run(run_copy)
    select = first(record, "phase", phase="select", status="done")
    record = changed(record, select, status="failed")
    record.events = [e for e in record.events if not isinstance(e, (RunStarted, CostEvent))]
    rows = table(only(sections.overview(record, "1")))
    assert (rows["generator"], rows["provider"], rows["sandbox"], rows["shell tools"], rows["cost"]) == (
        "fastapi\\_backend", "none", "", "off", "no provider calls")


def test_the_overview_says_shell_tools_on_and_a_select_without_how(run_copy):  # noqa: F811
    record = read_run(run_copy)
    record = changed(record, record.started, shell_tools_enabled=True)
    select = first(record, "phase", phase="select", status="done")
    record = changed(record, select, details={})
    record.recipe["model"].pop("name", None)
    rows = table(only(sections.overview(record, "1")))
    assert (rows["shell tools"], rows["generator"], rows["model"]) == ("on", "fastapi\\_backend", "")
    del record.recipe["generator"]
    assert table(only(sections.overview(record, "1")))["generator"] == ""  # nothing named, nothing made up


def test_a_select_that_said_how_without_a_generator_shows_only_how(run_copy):  # noqa: F811
    record = read_run(run_copy)
    del record.recipe["generator"]
    assert "\n| generator |  (rules) |\n" in only(sections.overview(record, "1"))


def test_the_start_is_shown_in_utc_whatever_the_kernels_zone(run_copy, monkeypatch):  # noqa: F811
    record = read_run(run_copy)
    record = changed(record, record.events[0], ts=1_000_000_000.0)
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        rows = table(only(sections.overview(record, "1")))
    finally:
        monkeypatch.undo()
        time.tzset()
    assert rows["started"] == "2001-09-09 01:46:40 UTC"


# -- the request and the timeline --------------------------------------------------------------


def test_the_request_is_fenced_as_the_recipe_kept_it(run_copy):  # noqa: F811
    record = read_run(run_copy)
    record.recipe["request"] = "make it\n```\n# not a heading"
    assert only(sections.request(record)) == "## The request\n\n````\nmake it\n```\n# not a heading\n````"
    del record.recipe["request"]
    assert only(sections.request(record)) == "## The request\n\n```\n\n```"


def test_the_timeline_counts_seconds_from_the_start_and_names_an_event_it_cannot_show(run_copy):  # noqa: F811
    record = read_run(run_copy)
    start = record.events[0].ts
    record = changed(record, record.events[1], ts=start + 12.345)
    odd = record.of_type("phase")[2]
    record = changed(record, odd, duration_s="slow")  # not a number: describe's format raises
    text = only(sections.timeline(record))
    assert text.startswith("## Timeline\n\nSeconds since the run started.\n\n```\n   0.00s  run started: ")
    lines = text.split("\n")
    assert "  12.35s  [select] started" in lines
    assert f"{odd.ts - start:7.2f}s  [phase] (not shown: ValueError)" in lines
    assert text.endswith("\n```") and len(lines) - 7 <= len(record.events)


# -- the decided calls ---------------------------------------------------------------------------

INTRO = ("## Decided calls\n\nEvery call that needed a decision, as its card showed it (the diff, the command or the "
         "arguments), who decided it (`card`: a person; `auto`: the approve mode the run was started with; "
         "`scripted`/`host`: a host script; `policy`, `timeout`, `cancelled`) and what it did.")


def test_each_decided_call_says_who_decided_and_what_it_did(run_copy):  # noqa: F811
    record = read_run(run_copy)
    asked = record.of_type("approval_requested")
    record = changed(record, first(record, "approval_resolved", call_id=asked[0].call_id), approved=False, by="card")
    record.events = [e for e in record.events if not (e.type == "approval_resolved" and e.call_id == asked[1].call_id)]
    result = first(record, "tool_result", call_id=asked[0].call_id)
    record = changed(record, result, ok=False, error_code="DENIED", summary="")
    record.events = [e for e in record.events if not (e.type == "tool_result" and e.call_id == asked[2].call_id)]
    cells = sections.decided_calls(record)
    assert cells[0] == ("markdown", INTRO) and len(cells) == 1 + len(asked)
    denied, undecided, unfinished = (source for _, source in cells[1:4])
    assert denied.startswith(f"### `{asked[0].call_id}` `write_file` (edit): denied by card\n\n```diff\n")
    assert denied.endswith("\n\nResult (refused: DENIED):\n\n```\n(no summary)\n```")
    assert undecided.startswith(f"### `{asked[1].call_id}` `write_file` (edit): undecided\n\n")
    assert "Result" not in unfinished and unfinished.endswith("\n```")
    approved = cells[4][1]
    assert approved.startswith(f"### `{asked[3].call_id}` `{asked[3].name}` (edit): approved by auto\n\n")
    assert "\n\nResult (ok):\n\n```\n" in approved


def test_a_run_with_no_decided_call_says_so(run_copy):  # noqa: F811
    record = read_run(run_copy)
    record.events = [e for e in record.events if e.type != "approval_requested"]
    assert sections.decided_calls(record) == [("markdown", INTRO + "\n\n*No call needed a decision.*")]


@pytest.mark.parametrize(("frozen", "shown"), [
    ({"proposal": "--- a/x\n+++ b/x\n-1\n+2", "arguments": {"path": "x", "content": "2"}},
     "```diff\n--- a/x\n+++ b/x\n-1\n+2\n```"),
    ({"arguments": {"path": "app/n.py", "content": "one\n"}},
     "```diff\n--- /dev/null\n+++ b/app/n.py\n@@ -0,0 +1 @@\n+one\n```"),
    ({"arguments": {"command": "pytest -q"}, "details": {"cwd": "app", "net": "none"}},
     '```sh\npytest -q\n```\n\nPlan:\n\n```json\n{\n  "cwd": "app",\n  "net": "none"\n}\n```'),
    ({"arguments": {"command": "ls"}}, "```sh\nls\n```"),
    ({"arguments": {"path": 3, "content": "x"}},
     'Arguments:\n\n```json\n{\n  "path": 3,\n  "content": "x"\n}\n```'),
    ({"arguments": {"command": ["ls"]}, "proposal": ""}, 'Arguments:\n\n```json\n{\n  "command": [\n    "ls"\n  ]\n}\n```'),
    ({}, "Arguments:\n\n```json\n{}\n```"),
    ({"arguments": None, "proposal": None}, "Arguments:\n\n```json\n{}\n```"),
], ids=["proposal", "new-file", "command-and-plan", "command", "arguments", "command-not-text", "nothing", "nones"])
def test_a_card_is_shown_as_its_diff_its_command_or_its_arguments(frozen, shown, run_copy):  # noqa: F811
    record = read_run(run_copy)
    asked = record.of_type("approval_requested")[0]
    record = changed(record, asked, request=frozen)
    source = sections.decided_calls(record)[1][1]
    head = f"### `{asked.call_id}` `{asked.name}` (edit): approved by auto\n\n"
    assert source.startswith(head + shown + "\n\nResult (ok):") or source == head + shown


# -- findings, reports, authorship -----------------------------------------------------------------


def test_findings_blockers_left_and_the_last_task_list(run_copy):  # noqa: F811
    record = read_run(run_copy)
    found = record.of_type("finding")
    record = changed(record, found[0], path="app/a.py", line=None)
    record = changed(record, record.done, blockers=["the app does not start"],
                     verification={"tasks": [{"status": "done", "id": "T1", "text": "log in"}, {}]})
    text = only(sections.findings(record))
    lines = [f"[{f.severity}] {f.source}: {f.message}" for f in record.of_type("finding")]
    lines[0] += " (app/a.py)"
    lines[1] += " (backend/auth.py:38)"
    assert text == ("## Findings\n\n```\n" + "\n".join([*lines, "[blocker left] the app does not start"]) + "\n```"
                    "\n\nThe task list at the end:\n\n```\n[done] T1 log in\n[]  \n```")


def test_a_run_with_no_findings_says_none(run_copy):  # noqa: F811
    record = read_run(run_copy)
    record.events = [e for e in record.events if e.type != "finding"]
    record = changed(record, record.done, verification={})
    assert only(sections.findings(record)) == "## Findings\n\n*None.*"


REPORTS = "## Request reports\n\nThe `test_api` scenarios the run ran against its app, redacted as they were stored."


def test_each_request_report_says_its_scenario_and_verdict(run_copy):  # noqa: F811
    record = read_run(run_copy)
    result = first(record, "tool_result", name="test_api")
    report = {"name": "log in", "scenario_id": "s`1", "passed": False, "steps": ["é"]}
    record = changed(record, result, data={"report": report}, summary="1 of 2 failed")
    other = first(record, "tool_result", name="write_file")
    record = changed(record, other, data={"report": {"passed": True}})  # not a scenario: not a report
    cells = sections.request_reports(record)
    assert cells == [("markdown", REPORTS), ("markdown", (
        "### ``s`1`` log in: failed\n\n```\n1 of 2 failed\n```\n\nThe report, as stored:\n\n```json\n"
        '{\n  "name": "log in",\n  "scenario_id": "s`1",\n  "passed": false,\n  "steps": [\n    "é"\n  ]\n}\n```'))]
    record = changed(record, first(record, "tool_result", name="test_api"), data={"report": dict(report, passed=True)})
    assert sections.request_reports(record)[1][1].startswith("### ``s`1`` log in: passed\n\n")
    record = changed(record, first(record, "tool_result", name="test_api"), data={"report": {"passed": False}})
    assert sections.request_reports(record)[1][1].startswith("### `` : failed\n\n")  # no id, no name: none made up


@pytest.mark.parametrize("data", [{}, {"report": "passed"}, None])
def test_a_run_with_no_request_report_says_so(data, run_copy):  # noqa: F811
    record = read_run(run_copy)
    record = changed(record, first(record, "tool_result", name="test_api"), data=data)
    assert sections.request_reports(record) == [("markdown", REPORTS + "\n\n*The run ran no request scenario.*")]


def test_who_wrote_which_file_in_its_four_groups(run_copy):  # noqa: F811
    record = read_run(run_copy)
    record = changed(record, record.done, authorship={"llm_authored": ["b.py", "a.py"], "generator_deleted": ["x"]})
    assert only(sections.authorship(record)) == (
        "## Who wrote which file\n\n**written by the generator, untouched** (0):\n\n*none*\n\n"
        "**written by the generator, modified by the LLM** (0):\n\n*none*\n\n"
        "**authored by the LLM** (2):\n\n- `b.py`\n- `a.py`\n\n"
        "**written by the generator, deleted by the LLM** (1):\n\n- `x`")
