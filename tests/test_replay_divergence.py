"""A replay that meets a different machine says so plainly, and the run ends at once.

The recordings are real (the shipped Library JWT cassette, or one written here by the real
recorder); what makes them diverge is a real condition of this run: a tool result that is
not the recorded one (a strict replay sees each read's fresh ``read_id``), an operator setting
that changes what the model is offered. The missing-package case, on an environment without
fastapi, is in ``test_install_paths.py`` (it needs an installed copy of the package).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_ext.errors import ErrorCode
from kernel_ext.pipeline.generation import generate
from kernel_ext.providers.divergence import ReplayDiverged, beyond, explain
from kernel_ext.providers.replay import ReplayProvider
from kernel_ext.scenarios import library_jwt

ROOT = Path(__file__).resolve().parent.parent


def request_record(*messages: dict, system: str = "You help.", tools: tuple[str, ...] = ("read_file",)) -> dict:
    return {"system": system, "messages": list(messages), "tools": [{"name": n, "sha256": n[:4]} for n in tools]}


USER = {"role": "user", "text": "Build the API"}
REPAIR = "[host] Phase 3, repair round 1. Fix these blockers, then answer without a tool call:\n- [ruff] undefined name: X (a.py:3)"


# -- the words, for each kind of difference -------------------------------------------------


def test_a_missing_module_in_the_checks_is_named_as_the_cause():
    recorded = request_record(USER, {"role": "user", "text": REPAIR})
    here = request_record(USER, {"role": "user", "text": REPAIR + "\n- [startup] ModuleNotFoundError: No module named 'jwt.api'"})
    why = explain(recorded, here, "request.messages[1].text")
    assert why.cause == "missing_module"
    assert why.words.startswith("the app could not start here: jwt is missing on this machine (the recording's machine had it)")
    assert "No module named 'jwt.api'" in why.words and "\n" not in why.words
    here = request_record(USER, {"role": "user", "text": REPAIR + "\n- [app-env] missing packages: PyJWT, passlib (offline)"})
    assert explain(recorded, here, "request.messages[1].text").words.startswith("the app could not start here: PyJWT, passlib are missing")


def test_another_finding_is_quoted_line_for_line():
    recorded = request_record(USER, {"role": "user", "text": REPAIR})
    here = request_record(USER, {"role": "user", "text": REPAIR.replace("name: X", "name: Y")})
    why = explain(recorded, here, "request.messages[1].text")
    assert why.cause == "observation"
    assert why.words == ("this machine's checks found something the recording's did not: "
                         "here '[ruff] undefined name: Y (a.py:3)'; recorded '[ruff] undefined name: X (a.py:3)'")


def test_a_tool_result_that_failed_here_says_so():
    call = {"role": "assistant", "text": "", "tool_calls": [{"id": "1", "name": "test_api", "arguments": "{}"}]}
    recorded = request_record(USER, call, {"role": "tool", "call_id": "1", "name": "test_api", "content": "4/4 passed", "is_error": False})
    here = request_record(USER, call, {"role": "tool", "call_id": "1", "name": "test_api", "content": "0/4 passed", "is_error": True})
    why = explain(recorded, here, "request.messages[2].content")
    assert why.cause == "tool_result"
    assert why.words == ("this machine's result of test_api differs from the recording's (it failed here, not in the recording): "
                         "here '0/4 passed'; recorded '4/4 passed'")


def test_other_tools_system_request_and_path_are_told_apart():
    recorded = request_record(USER)
    why = explain(recorded, request_record(USER, tools=("read_file", "run_command")), "request.tools (length)")
    assert why.cause == "tools" and "here also run_command" in why.words and "shell tools" in why.words
    why = explain(recorded, request_record(USER, tools=("read_fil",)), "request.tools[0].name")
    assert "here also read_fil; not here read_file" in why.words
    why = explain(recorded, request_record(USER, system="You help.\nShell tools are on."), "request.system")
    assert why.cause == "system" and why.words.endswith("shell tools): here 'Shell tools are on.'")  # the recorded line is still there
    why = explain(recorded, request_record({"role": "user", "text": "Build the app"}), "request.messages[0].text")
    assert why.cause == "request" and "here 'Build the app'; recorded 'Build the API'" in why.words
    why = explain(recorded, request_record(USER, {"role": "user", "text": "more"}), "request.messages (length)")
    assert why.cause == "path" and "2 messages where the recording's had 1" in why.words
    assert beyond(10).cause == "beyond" and "more model turns than the recording holds (10)" in beyond(10).words


async def test_the_replay_error_is_one_line_with_the_cause_and_the_place(tmp_path):
    from kernel_ext.providers import Conversation
    from kernel_ext.providers.scripted import Script, ScriptedProvider, Turn

    cassette = tmp_path / "short.jsonl"
    scripted = ScriptedProvider(Script.of("short", [Turn("done")]))
    scripted.record(cassette)
    conversation = Conversation(system="You help.")
    conversation.user("Build the API")
    await scripted.complete(conversation)
    replay = ReplayProvider(cassette)
    await replay.complete(conversation)  # the same request: answered
    with pytest.raises(ReplayDiverged) as caught:
        await replay.complete(conversation)
    error = caught.value
    assert error.code == ErrorCode.REPLAY_DIVERGED and "\n" not in error.message
    assert error.message.startswith("the replay cannot go on: this machine needed more model turns than the recording holds (1)")
    assert "request #2 goes beyond cassette short.jsonl, which holds 1 exchange(s)" in error.message
    assert error.data == {"exchange": 2, "cause": "beyond"}
    again = pickle.loads(pickle.dumps(error))  # as it crosses a worker's pipe: still the run-ending kind
    assert type(again) is ReplayDiverged and (again.code, again.message, again.data) == (error.code, error.message, error.data)


# -- a run that meets the difference ends at once ------------------------------------------


async def test_a_strict_replay_meeting_another_tool_result_ends_the_run_once(tmp_path):
    """Each read gets a fresh ``read_id``: a strict replay of the shipped recording meets a
    tool result it did not record, says which, and the run stops there (no Phase 3 rounds)."""
    run = generate("example:library", library_jwt.REQUEST, run_dir=tmp_path / "run",
                   provider=ReplayProvider(library_jwt.CASSETTE, strict=True), approve="all")
    done = await run.wait()
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    errors = [e for e in events if e["type"] == "error"]
    assert [e["code"] for e in errors] == ["REPLAY_DIVERGED"]
    message = errors[0]["message"]
    assert message.startswith("the replay cannot go on: this machine's result of read_file differs from the recording's: here ")
    assert "read_id" in message and "[request #5 diverges from cassette library-jwt.cassette.jsonl at request.messages[9].content]" in message
    assert done.status == "failed" and events[-1]["type"] == "done" and events[-1]["status"] == "failed"
    assert not [e for e in events if e["type"] == "phase" and e["phase"] == "validate"]  # it ended at once
    assert "Traceback" not in (tmp_path / "run" / "events.jsonl").read_text()


@pytest.mark.timeout(600)  # the CLI's own bound is 300 s
def test_the_cli_prints_one_line_for_a_divergence_and_exits_non_zero(tmp_path):
    """Shell tools on here, off when the recording was made: the model is offered something
    else from the first customising request on."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BESSER_LLM_ENABLE_SHELL_TOOLS": "1"}
    for name in ("BESSER_LLM_PROVIDER", "BESSER_LLM_CASSETTE", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(name, None)
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "kernel_ext", "generate", "example:library", library_jwt.REQUEST, "--out", str(out),
         "--provider", f"replay:{library_jwt.CASSETTE}", "--approve", "all"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    said = [line for line in done.stdout.splitlines() if "REPLAY_DIVERGED" in line or "replay cannot go on" in line]
    assert len(said) == 1, done.stdout
    assert "the instructions sent to the model differ from the recording's" in said[0] and "shell tools" in said[0]
    assert "done: failed - the run stopped on the error above" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert [e["code"] for e in events if e["type"] == "error"] == ["REPLAY_DIVERGED"]
    assert events[-1]["status"] == "failed"
