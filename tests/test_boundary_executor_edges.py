"""The Executor's less-travelled paths, exactly: blocking tools, the words of its refusals, data.

Each test pins something a surviving mutant changed (``make mutation``, bench/MUTATION.md):
a blocking tool runs in a worker thread with the frozen arguments and the run's context; a
tool's data and a refusal's data reach the result; a schema refusal names nested fields and
all of them; a tool bug is logged with its name and traceback; a run without a workspace
refuses a file-touching call by name. Real workspace, real files.
"""

from __future__ import annotations

import logging
import threading

import boundary_fixtures
import pytest
from boundary_fixtures import EDIT, executor
from pydantic import model_validator

from kernel_ext.boundary import Executor, ToolCall, always_approve
from kernel_ext.errors import ToolFailure
from kernel_ext.tools.base import (
    Category,
    Preparation,
    ToolArgs,
    ToolContext,
    ToolOutcome,
    ToolSpec,
)
from kernel_ext.tools.registry import ToolCatalog
from kernel_ext.workspace import Workspace


def test_a_blocking_tool_runs_in_a_worker_thread_with_the_frozen_arguments_and_the_runs_context(project):
    seen: dict = {}

    def run(args, ctx):
        seen.update(args=args.model_dump(), ctx=ctx, thread=threading.get_ident())
        (ctx.workspace.root / args.path).write_text(args.content)
        return ToolOutcome(f"wrote {args.path}", {"path": args.path, "bytes": len(args.content)})

    spec = ToolSpec("slow_put", Category.EDIT, boundary_fixtures.WriteArgs, "x", run, blocking=True)
    ex = executor(project, spec)
    result = ex.execute_sync(ToolCall("c1", "slow_put", {"path": "app.py", "content": "blocking\n"}))
    assert result.ok and result.observation == "wrote app.py"
    assert result.data == {"path": "app.py", "bytes": 9}
    assert seen["args"] == {"path": "app.py", "content": "blocking\n", "tags": []}
    assert seen["ctx"] is ex.context
    assert seen["thread"] != threading.get_ident()  # not the loop's thread
    assert (project / "app.py").read_text() == "blocking\n"


def test_a_blocking_tool_may_return_an_awaitable(project):
    async def later():
        return ToolOutcome("done later", {"k": 1})

    spec = ToolSpec("slow_async", Category.READ, boundary_fixtures.PathArgs, "x", lambda a, c: later(), blocking=True)
    result = executor(project, spec).execute_sync(ToolCall("c1", "slow_async", {"path": "app.py"}))
    assert result.ok and result.observation == "done later" and result.data == {"k": 1}


def test_a_tool_that_returns_no_outcome_is_a_host_bug_named_as_such(project):
    spec = ToolSpec("bad", Category.READ, boundary_fixtures.PathArgs, "x", lambda a, c: "just text")
    with pytest.raises(TypeError, match=r"^bad returned str, not ToolOutcome$"):
        executor(project, spec).execute_sync(ToolCall("c1", "bad", {"path": "app.py"}))


def test_a_tool_bug_is_logged_with_the_tools_name_and_its_traceback(project, caplog):
    caplog.set_level(logging.ERROR, logger="kernel_ext.boundary.executor")
    result = executor(project, *boundary_fixtures.TOOLS).execute_sync(ToolCall("c1", "crash", {"path": "x"}))
    assert result.error.code == "internal_error" and result.error.message == "ZeroDivisionError: tool bug"
    [record] = [r for r in caplog.records if r.name == "kernel_ext.boundary.executor"]
    assert record.getMessage() == "tool crash failed"
    assert record.exc_info and record.exc_info[0] is ZeroDivisionError


def test_a_refusals_data_reaches_the_result(project):
    def run(args, ctx):
        raise ToolFailure("custom_refusal", "no", {"path": args.path, "why": "because"})

    spec = ToolSpec("no", Category.READ, boundary_fixtures.PathArgs, "x", run)
    result = executor(project, spec).execute_sync(ToolCall("c1", "no", {"path": "app.py"}))
    assert result.error.code == "custom_refusal"
    assert result.data == {"path": "app.py", "why": "because"}


def test_a_run_without_a_workspace_refuses_a_file_touching_call_by_name(project):
    seen = []
    spec = ToolSpec(
        "touch", Category.EDIT, boundary_fixtures.PathArgs, "x", lambda a, c: seen.append(a) or ToolOutcome("ran"),
        lambda a, c: Preparation(files=(a.path,)),
    )
    result = executor(None, spec).execute_sync(ToolCall("c1", "touch", {"path": "app.py"}))
    assert result.error.code == "internal_error"
    assert result.error.message == "this run has no workspace to snapshot files in"
    assert seen == []


def test_a_host_callbacks_tool_failure_is_wrapped_with_its_code_named(project):
    def approver(request):
        raise ToolFailure("policy_denied", "a host bug that looks like a refusal")

    before = (project / "app.py").read_bytes()
    with pytest.raises(RuntimeError, match=r"^host callback raised ToolFailure \(policy_denied\); refusing to treat it as a tool observation$"):
        executor(project, *boundary_fixtures.TOOLS, approver=approver).execute_sync(
            ToolCall("c1", "put", {"path": "app.py", "content": "x\n"})
        )
    assert (project / "app.py").read_bytes() == before


def _put(ex: Executor, **arguments):
    return ex.execute_sync(ToolCall("c1", "put", arguments))


def test_schema_refusals_name_every_field_nested_fields_by_their_path(project):
    ex = executor(project, *boundary_fixtures.TOOLS)
    before = (project / "app.py").read_bytes()

    both_missing = _put(ex)
    assert both_missing.error.code == "missing_argument"
    assert both_missing.error.message == "put needs 'path', 'content'"

    missing_and_wrong = _put(ex, path="app.py", tags=["ok", 5])
    assert missing_and_wrong.error.code == "missing_argument"
    assert missing_and_wrong.error.message == "put needs 'content'; also 'tags.1': Input should be a valid string"

    missing_and_two_wrong = _put(ex, path=1, tags=[None])
    assert missing_and_two_wrong.error.message == (
        "put needs 'content'; also 'path': Input should be a valid string; 'tags.0': Input should be a valid string"
    )

    two_wrong = _put(ex, path=1, content="x", tags=[None])
    assert two_wrong.error.code == "invalid_argument"
    assert two_wrong.error.message == "put: 'path': Input should be a valid string; 'tags.0': Input should be a valid string"
    assert (project / "app.py").read_bytes() == before


class RangeArgs(ToolArgs):
    start: int
    end: int

    @model_validator(mode="after")
    def ordered(self):
        if self.end < self.start:
            raise ValueError("end comes before start")
        return self


def test_a_whole_arguments_refusal_is_named_arguments(project):
    seen = []
    spec = ToolSpec("span", Category.READ, RangeArgs, "x", lambda a, c: seen.append(a) or ToolOutcome("ran"))
    result = executor(project, spec).execute_sync(ToolCall("c1", "span", {"start": 5, "end": 2}))
    assert result.error.code == "invalid_argument"
    assert result.error.message == "span: 'arguments': Value error, end comes before start"
    assert seen == []


def test_a_prepare_that_returns_no_preparation_is_a_host_bug_named_as_such(project):
    spec = ToolSpec("half", Category.EDIT, boundary_fixtures.PathArgs, "x", lambda a, c: ToolOutcome("ran"), lambda a, c: "files")
    with pytest.raises(TypeError, match=r"^half\.prepare returned str, not Preparation$"):
        executor(project, spec).execute_sync(ToolCall("c1", "half", {"path": "app.py"}))


# -- construction defaults, what is offered, and what the observer and approver are told ---------


def test_a_bare_executor_is_read_only_with_its_own_context_ids_and_the_processes_secrets(monkeypatch):
    key = "sk-proc-9Zx8Yw7Vu6Ts5Rq4"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    ex = Executor(ToolCatalog(boundary_fixtures.TOOLS))
    assert isinstance(ex.context, ToolContext) and ex.run_id == ""
    assert ex.offered.names() == ("refuse", "crash")  # nothing needing a workspace or a shell
    assert [ex.call_ids.mint(), ex.call_ids.mint()] == ["c1", "c2"]
    assert Executor(ToolCatalog(boundary_fixtures.TOOLS)).call_ids.mint() == "c1"  # one minter per executor
    refused = ex.execute_sync(ToolCall("c1", "refuse", {"path": "p"}))
    assert refused.error.code == "custom_refusal"  # the default policy let the read tool run
    leaked = ex.execute_sync(ToolCall("c2", "refuse", {"path": key}))
    assert leaked.error.code == "secret_in_arguments"


def test_only_tools_both_offered_and_available_are_offered(project):
    ex = Executor(
        ToolCatalog(boundary_fixtures.TOOLS), ToolContext(services={"workspace": Workspace(project)}),
        policy=EDIT, offered=["peek", "sh", "no_such_tool"],
    )
    assert ex.offered.names() == ("peek",)
    assert ex.execute_sync(ToolCall("c1", "peek", {"path": "app.py"})).ok
    put = ex.execute_sync(ToolCall("c2", "put", {"path": "app.py", "content": "x"}))
    assert put.error.code == "tool_not_offered"
    assert put.error.message == "'put' is not offered in this run (its preconditions are absent: workspace)"
    crash = ex.execute_sync(ToolCall("c3", "crash", {"path": "x"}))
    assert crash.error.message == "'crash' is not offered in this run (its preconditions are absent: none)"
    shell = ex.execute_sync(ToolCall("c4", "sh", {"path": "x"}))
    assert shell.error.message == "'sh' is not offered in this run (its preconditions are absent: shell)"
    both = ToolSpec("both", Category.READ, boundary_fixtures.PathArgs, "x", lambda a, c: ToolOutcome("ran"),
                    requires=frozenset({"workspace", "shell"}))
    lacking = Executor(ToolCatalog([both]), ToolContext()).execute_sync(ToolCall("c5", "both", {"path": "x"}))
    assert lacking.error.message == "'both' is not offered in this run (its preconditions are absent: shell, workspace)"


def test_an_unknown_name_of_any_type_is_refused_listing_what_is_offered(project):
    ex = executor(project, *boundary_fixtures.TOOLS)
    unknown = ex.execute_sync(ToolCall("c1", "rm_rf", {}))
    assert unknown.name == "rm_rf" and unknown.error.code == "unknown_tool"
    assert unknown.error.message == "no tool named 'rm_rf'; offered tools: peek, put, refuse, crash"
    odd = ex.execute_sync(ToolCall("c2", ["put"], {}))
    assert odd.name == "['put']" and odd.error.code == "unknown_tool"
    nothing = Executor(ToolCatalog(boundary_fixtures.TOOLS), offered=[]).execute_sync(ToolCall("c3", "x", {}))
    assert nothing.error.message == "no tool named 'x'; offered tools: none"


def test_the_observer_and_the_approver_are_told_exactly_which_call_and_request(project):
    events, requests = [], []
    ex = Executor(
        ToolCatalog(boundary_fixtures.TOOLS), ToolContext(services={"workspace": Workspace(project)}),
        policy=EDIT, approver=lambda r: requests.append(r) or True, observer=events.append, run_id="run-7",
    )
    assert ex.execute_sync(ToolCall("c9", "put", {"path": "app.py", "content": "hi"})).ok
    [request] = requests
    assert (request.call_id, request.name, request.run_id) == ("c9", "put", "run-7")
    assert request.proposal == "write 2 characters to app.py"
    assert [(e.kind, e.call_id, e.name, e.request, e.approved) for e in events] == [
        ("approval_requested", "c9", "put", request, None),
        ("approval_resolved", "c9", "put", request, True),
        ("dispatch", "c9", "put", None, None),
    ]
    denied_events = []
    Executor(
        ToolCatalog(boundary_fixtures.TOOLS), ToolContext(services={"workspace": Workspace(project)}),
        policy=EDIT, approver=lambda r: False, observer=denied_events.append,
    ).execute_sync(ToolCall("c1", "put", {"path": "app.py", "content": "no"}))
    assert [(e.kind, e.approved) for e in denied_events] == [("approval_requested", None), ("approval_resolved", False)]
    assert denied_events[0].request.run_id == ""


@pytest.mark.parametrize("when", ["during approval", "while dispatch was reported"])
def test_a_stale_input_names_the_file_the_change_and_when(project, when):
    target = project / "app.py"

    def change(_):
        target.write_text("someone else, longer\n")

    approver = (lambda r: change(r) or True) if when == "during approval" else always_approve
    observer = (lambda e: change(e) if e.kind == "dispatch" else None) if when != "during approval" else None
    ex = Executor(
        ToolCatalog(boundary_fixtures.TOOLS), ToolContext(services={"workspace": Workspace(project)}),
        policy=EDIT, approver=approver, observer=observer,
    )
    result = ex.execute_sync(ToolCall("c1", "put", {"path": "app.py", "content": "mine\n"}))
    assert result.error.code == "stale_input"
    assert result.error.message.startswith("'app.py' ")
    assert result.error.message.endswith(f" {when}; nothing ran. Read it again and make a new request")
    assert target.read_text() == "someone else, longer\n"


def test_a_blocking_tools_preparation_also_runs_off_the_loop_with_the_frozen_arguments(project):
    seen: dict = {}

    def prepare(args, ctx):
        seen.update(args=args.model_dump(), ctx=ctx, thread=threading.get_ident())
        return Preparation(files=(args.path,), proposal=f"touch {args.path}")

    requests = []
    spec = ToolSpec("slow_touch", Category.EDIT, boundary_fixtures.PathArgs, "x", lambda a, c: ToolOutcome("ran"), prepare, blocking=True)
    ex = executor(project, spec, approver=lambda r: requests.append(r) or True)
    assert ex.execute_sync(ToolCall("c1", "slow_touch", {"path": "app.py"})).ok
    assert seen["args"] == {"path": "app.py"} and seen["ctx"] is ex.context
    assert seen["thread"] != threading.get_ident()
    assert requests[0].proposal == "touch app.py" and [f.path for f in requests[0].files] == ["app.py"]


def test_a_blocking_preparation_may_return_an_awaitable(project):
    async def later(args):
        return Preparation(proposal=f"later {args.path}")

    requests = []
    spec = ToolSpec("slow_async_prep", Category.EDIT, boundary_fixtures.PathArgs, "x", lambda a, c: ToolOutcome("ran"),
                    lambda a, c: later(a), blocking=True)
    assert executor(project, spec, approver=lambda r: requests.append(r) or True).execute_sync(
        ToolCall("c1", "slow_async_prep", {"path": "app.py"})
    ).ok
    assert requests[0].proposal == "later app.py"
