
"""Approval bypasses: what is approved is exactly what runs, on exactly the files that were shown.

Hosted runs (``start_run``) whose cards are answered from outside, as the REST handler does;
the real default catalog; a scripted provider (labelled: no live model) naming tools it was
not offered; and a body posted to the real server asking for shell tools.
"""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest
from jupyter_fixtures import (  # noqa: F401 - the server fixtures are requested by name
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    poll,
    runs_dir,
)
from sandbox_fixtures import tier_param

from kernel_ext.boundary import ExecutionPolicy, Executor, ToolCall
from kernel_ext.hosting.bus import EventLog
from kernel_ext.pipeline.guards import Budgets, EditChurn
from kernel_ext.hosting.layout import RunLayout
from kernel_ext.pipeline.loop import LoopGuards, customize
from kernel_ext.pipeline.reporting import boundary_observer
from kernel_ext.hosting.run import start_run
from kernel_ext.providers.messages import Conversation
from kernel_ext.providers.scripted import Script, ScriptedProvider, Turn, call
from kernel_ext.tools.base import Category, ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.tools.task_list import TaskList
from kernel_ext.workspace import Workspace

from .world import HOST_SECRET, World, output, sh, shell_executor


def hosted(world: World, tmp_path, calls: list[ToolCall], results: list):
    """A run whose body sends ``calls`` through an Executor whose approver is the run's card queue."""
    layout = RunLayout.create(tmp_path / "runs_hosted")

    async def body(ctx) -> None:
        executor = Executor(default_catalog(), ToolContext(services={"workspace": Workspace(world.ws)}),
                            policy=ExecutionPolicy.allowing(["read", "edit"]), approver=ctx.approver,
                            observer=boundary_observer(ctx.events, ctx.approver))
        for tool_call in calls:
            results.append(await executor.execute(tool_call))

    return start_run(body, layout)


async def test_arguments_changed_after_the_card_was_shown_are_not_what_runs(world, tmp_path):
    tool_call = ToolCall("w1", "write_file", {"path": "notes.py", "content": "APPROVED = True\n"})
    results: list = []
    run = hosted(world, tmp_path, [tool_call], results)
    pending = await poll(run.pending_approvals)
    # While the card waits, the caller's copy is rewritten (path escape, other content, extra field).
    tool_call.arguments["content"] = "TAMPERED = True\n"
    tool_call.arguments["path"] = os.path.relpath(world.outside / "module.py", world.ws)
    tool_call.arguments["sneaky"] = "x"
    card = next(e for e in run.events.events if e.type == "approval_requested")
    assert card.request["arguments"] == {"path": "notes.py", "content": "APPROVED = True\n"}
    assert run.decide(pending[0], True)
    await asyncio.wait_for(run.wait(), 20)
    assert results[0].ok, results[0].observation
    assert (world.ws / "notes.py").read_text() == "APPROVED = True\n"
    assert world.unchanged()


async def test_a_file_changed_while_its_card_waits_is_stale_and_nothing_runs(world, tmp_path):
    target = world.ws / "app.py"
    tool_call = ToolCall("m1", "modify_file", {"path": "app.py", "old_text": "hello", "new_text": "approved"})
    results: list = []
    run = hosted(world, tmp_path, [tool_call], results)
    pending = await poll(run.pending_approvals)
    target.write_text("print('hello from someone else')\n")
    run.decide(pending[0], True)
    await asyncio.wait_for(run.wait(), 20)
    assert results[0].error.code == "stale_input" and "during approval" in results[0].error.message
    assert target.read_text() == "print('hello from someone else')\n"
    assert world.unchanged()


async def test_a_link_swapped_in_while_the_card_waits_is_refused(world, tmp_path):
    target = world.ws / "app.py"
    tool_call = ToolCall("m2", "modify_file", {"path": "app.py", "old_text": "hello", "new_text": "approved"})
    results: list = []
    run = hosted(world, tmp_path, [tool_call], results)
    pending = await poll(run.pending_approvals)
    target.unlink()
    target.symlink_to(world.outside / "module.py")
    run.decide(pending[0], True)
    await asyncio.wait_for(run.wait(), 20)
    assert not results[0].ok and results[0].error.code in ("stale_input", "symlink_refused")
    assert target.is_symlink() and world.unchanged()


@pytest.mark.parametrize("policy", [tier_param("bwrap")])
def test_a_background_job_rewriting_a_file_during_approval_makes_it_stale(world, registry, policy):
    """A job the model started earlier keeps changing the file the card shows: nothing is written."""
    target = world.ws / "app.py"

    def slow_yes(request) -> bool:
        """A person reading the card while the job rewrites the file: approves once it has (at least twice)."""
        shown = target.read_text()
        deadline = time.monotonic() + 60
        while target.read_text().count("# tick") < shown.count("# tick") + 2:
            assert time.monotonic() < deadline, "the background job never rewrote the file"
            time.sleep(0.02)
        return True

    executor = shell_executor(world, registry, policy, approver=slow_yes)
    started = sh(executor, "(while true; do echo \"# tick $(date +%s%N)\" >> app.py; sleep 0.02; done) >/dev/null 2>&1 & echo started")
    assert started.ok, output(started)
    try:
        result = executor.execute_sync(ToolCall("m3", "modify_file", {"path": "app.py", "old_text": "hello", "new_text": "approved"}))
    finally:
        executor.context.services["shell"].close()
    assert not result.ok and result.error.code == "stale_input", result.observation
    assert "approved" not in target.read_text()
    assert world.unchanged()


def test_a_model_naming_tools_it_was_not_offered_gets_named_refusals(world, tmp_path):
    """Scripted provider (labelled; no live model): shell tools, a made-up tool, a generator without a model."""
    tasks = TaskList()
    context = ToolContext(services={"workspace": Workspace(world.ws), "task_list": tasks})
    executor = Executor(default_catalog(), context, policy=ExecutionPolicy.allowing([Category.READ, Category.EDIT, Category.PLAN]),
                        approver=lambda request: True)
    assert "run_command" not in executor.offered and "install_dependencies" not in executor.offered
    probe = tmp_path / "pwned"
    turns = [
        Turn("", (call("run_command", {"command": f"touch {probe}"}),
                  call("install_dependencies", {"command": f"touch {probe}"}),
                  call("exec_shell", {"cmd": f"touch {probe}"}),
                  call("generate_fastapi_backend", {}),
                  call("write_file", {"path": os.path.relpath(world.secret_file, world.ws), "content": "x"}))),
        Turn("done"),
    ]
    events = EventLog("sec-unoffered")
    conversation = Conversation(system="test")
    conversation.user("do it")
    result = asyncio.run(customize(ScriptedProvider(Script.of("unoffered", turns)), conversation, executor, events, tasks,
                                   LoopGuards(Budgets(max_turns=5), EditChurn(limit=5))))
    codes = {e.name: e.error_code for e in events.events if e.type == "tool_result"}
    assert codes == {"run_command": "tool_not_offered", "install_dependencies": "tool_not_offered",
                     "exec_shell": "unknown_tool", "generate_fastapi_backend": "tool_not_offered",
                     "write_file": "outside_workspace"}, codes
    assert result.stop == "finished" and not probe.exists()
    assert world.secret_file.read_text() == HOST_SECRET + "\n" and world.unchanged()


@pytest.mark.slow
async def test_a_rest_body_asking_for_shell_tools_gets_none(world, tmp_path, jp_root_dir, jp_fetch, jp_serverapp):
    """The real server: widening fields are dropped, and the scripted model's shell calls are refused."""
    from kernel_ext.model.examples import build_library_model
    from kernel_ext.model.jsonform import model_to_dict
    from kernel_ext.server.handlers.base import STATE_KEY

    probe = tmp_path / "pwned-by-rest"
    script = jp_root_dir / "script.json"  # a file a request names lies under the server's root
    script.write_text(json.dumps({"name": "wants-a-shell", "turns": [
        {"text": "", "tool_calls": [{"name": "submit_tasks", "arguments": {"tasks": ["check the backend"]}}]},
        {"text": "", "tool_calls": [{"name": "run_command", "arguments": {"command": f"touch {probe}"}},
                                    {"name": "install_dependencies", "arguments": {"command": f"touch {probe}"}}]},
        {"text": "", "tool_calls": [{"name": "task_list", "arguments": {"action": "blocked", "id": "T1", "reason": "no shell"}}]},
        *[{"text": "done"}] * 12,
    ]}))
    body = {"kind": "generate", "request": "A FastAPI backend", "model_json": model_to_dict(build_library_model()),
            "provider": f"scripted:{script}", "target": "fastapi_backend", "approve": "all",
            "allow_shell_tools": True, "shell_tools_enabled": True, "enable_shell": True, "sandbox_policy": "off",
            "operator": {"shell_tools_enabled": True}, "tools": ["run_command"], "categories": ["shell"]}
    response = await jp_fetch("besser-agent", "runs", method="POST", body=json.dumps(body))
    run = jp_serverapp.web_app.settings[STATE_KEY].manager.get(json.loads(response.body)["run"]["id"])
    done = await asyncio.wait_for(run.wait(), 300)
    started = run.events.events[0]
    assert started.type == "run_started" and started.shell_tools_enabled is False
    results = [e for e in run.events.events if e.type == "tool_result" and e.name in ("run_command", "install_dependencies")]
    assert [(e.name, e.error_code) for e in results] == [("run_command", "tool_not_offered"), ("install_dependencies", "tool_not_offered")]
    assert done is not None and not probe.exists()
    config = json.loads((await jp_fetch("besser-agent", "config")).body)
    assert config["features"]["shell_tools_enabled"] is False
    assert world.unchanged()
