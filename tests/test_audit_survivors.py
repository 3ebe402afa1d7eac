"""The five one-line bugs the suite audit planted that no test caught, each caught here through a real entry point.

1. fail closed: a session whose tier cannot start refuses, and the command leaves no mark
   (``ShellService.check_enabled`` must never fall back to ``off``);
2. secret wiring: an operator key that matches no key shape, echoed by the endpoint into
   text, a task list and tool arguments, is in no event and no file of a real run
   (``start_run`` must hand ``known_secrets`` to the run's ``EventLog``);
3. content changes: a file rewritten in place with the same size and its mtime restored
   while the card waits is stale (``FileSnapshot.same_version`` compares the sha256);
4. the edit window: the lines just past and just before a windowed read are not editable
   (``ReadView.uncovered``'s bounds);
5. secret-name rules: variables named like a session, a certificate or an API setting (none
   contains KEY or TOKEN) never reach a sandboxed command (``sandbox/env.py``'s extra rules).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from file_tool_helpers import Harness
from jupyter_fixtures import jp_asyncio_loop, parse_sse_text  # noqa: F401
from provider_server import Plan, fragments, loopback_only, openai_stream, server  # noqa: F401
from sandbox_fixtures import make_run
from shell_tools_fixtures import needs_bwrap

from kernel_ext.boundary import ApprovalPolicy, ExecutionPolicy, Executor, ToolCall
from kernel_ext.errors import ErrorCode
from kernel_ext.sandbox import bwrap, tiers
from kernel_ext.sandbox.config import ShellSettings
from kernel_ext.sandbox.oneoff import run_confined
from kernel_ext.sandbox.session.service import ShellService
from kernel_ext.sandbox.shtools.shell import Shell
from kernel_ext.tools.base import ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.workspace import Workspace

# -- 1. fail closed: a session whose tier cannot start ----------------------------------------

SHELL_CALLS = {"run_command": {"command": "touch probe"}, "sh_run": {"command": "touch probe"}}


def shell_executor(tmp_path: Path):
    """A run with shell tools on under the ``bwrap`` policy, behind the real Executor (host approves)."""
    run = make_run(tmp_path)
    service = ShellService(run.ws, run_id="audit", enabled=True, home=run.home, settings=ShellSettings(policy="bwrap"))
    Shell.for_service(service, state_dir=tmp_path / "state")
    executor = Executor(
        default_catalog(),
        ToolContext(services={"workspace": Workspace(run.ws), "shell": service}),
        policy=ExecutionPolicy.allowing(["shell", "plan"]),
        approvals=ApprovalPolicy(),
        approver=lambda request: True,
    )
    return run, service, executor


@pytest.fixture
def bwrap_missing(monkeypatch):
    """The operator named ``bwrap`` and it cannot start on this host (the binary is gone)."""
    tiers.reset()
    monkeypatch.setattr(bwrap, "bwrap_path", lambda: "/nonexistent/bwrap")
    monkeypatch.setattr(tiers, "bwrap_path", lambda: "/nonexistent/bwrap")
    yield
    monkeypatch.undo()
    tiers.reset()


@pytest.mark.parametrize("tool", sorted(SHELL_CALLS))
def test_a_session_whose_tier_cannot_start_refuses_and_runs_nothing(tmp_path, bwrap_missing, tool):
    run, service, executor = shell_executor(tmp_path)
    try:
        result = executor.execute_sync(ToolCall("c1", tool, SHELL_CALLS[tool]))
        assert not result.ok and result.error.code == ErrorCode.SANDBOX_UNAVAILABLE, result.observation
        assert result.error.message == tiers.UNAVAILABLE_MESSAGE
        assert not (run.ws / "probe").exists(), "the command ran although its sandbox could not start"
        assert sorted(p.name for p in run.ws.iterdir()) == ["project.txt", "sub"]
    finally:
        service.close()


@needs_bwrap
@pytest.mark.parametrize("tool", sorted(SHELL_CALLS))
def test_the_same_command_leaves_its_mark_when_the_tier_starts(tmp_path, tool):
    """The control: the refusal above is the sandbox's, not a command that could never leave a mark."""
    run, service, executor = shell_executor(tmp_path)
    try:
        result = executor.execute_sync(ToolCall("c1", tool, SHELL_CALLS[tool]))
        assert result.ok, result.observation
        assert result.data["tier"] == "bwrap" and (run.ws / "probe").is_file()
    finally:
        service.close()


# -- 2. secret wiring: a real run's events and files ---------------------------------------------

OPERATOR_KEY = "correct-horse-battery-staple-42"  # matches none of the key-shape patterns


def _echoing_turns() -> list[Plan]:
    tasks = json.dumps({"tasks": [f"check the key {OPERATOR_KEY} is configured", "write nothing"]})
    looking = openai_stream(
        [f"Your key is {OPERATOR_KEY}, ", "let me look for it."],
        [("c2", "search_in_files", fragments(json.dumps({"pattern": OPERATOR_KEY}), 7)),
         ("c3", "read_file", fragments(json.dumps({"path": f"{OPERATOR_KEY}.txt"}), 5))],
    )
    done = openai_stream([f"Done; I used {OPERATOR_KEY[:12]}", OPERATOR_KEY[12:], " throughout."], [], finish="stop")
    return [Plan(chunks=openai_stream([], [("c1", "submit_tasks", fragments(tasks, 9))])), Plan(chunks=looking), Plan(chunks=done)]


@pytest.fixture
def operator_key(server, monkeypatch):  # noqa: F811
    """The operator's key in the server's environment; the endpoint answers only it and echoes it."""
    from kernel_ext.secrets import _KEY_SHAPES

    assert not _KEY_SHAPES.search(OPERATOR_KEY)  # only the run's known secrets can catch it
    monkeypatch.setenv("OPENAI_API_KEY", OPERATOR_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    server.require_key("openai", OPERATOR_KEY)
    server.plan(*_echoing_turns())
    return server


def assert_key_in_no_event_and_no_file(events: list[dict], run_dir: Path, seen) -> None:
    assert len(seen.requests) >= 3 and seen.requests[0].headers["authorization"] == f"Bearer {OPERATOR_KEY}"
    calls = [(e["name"], e["arguments"]) for e in events if e["type"] == "tool_call"]
    assert [name for name, _ in calls][:2] == ["search_in_files", "read_file"], calls  # the echo reached the run
    texts = "".join(e["text"] for e in events if e["type"] == "text")
    assert "[redacted]" in texts and "[redacted]" in json.dumps(calls)
    for event in events:
        assert OPERATOR_KEY not in json.dumps(event), event["type"]
    leaked = [str(p.relative_to(run_dir)) for p in run_dir.rglob("*")
              if p.is_file() and not p.is_symlink() and OPERATOR_KEY.encode() in p.read_bytes()]
    assert leaked == [], f"the key reached {leaked}"
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    assert len(lines) == len(events) and not any(OPERATOR_KEY in line for line in lines)


@pytest.mark.slow
def test_an_operator_key_the_endpoint_echoes_is_in_no_event_and_no_file_of_an_api_run(operator_key, tmp_path):
    from kernel_ext.pipeline.generation import generate

    async def go():
        run = generate("example:library", "A FastAPI backend", run_dir=tmp_path / "run", provider="openai",
                       target="fastapi_backend", approve="all")
        return run, await asyncio.wait_for(run.wait(), 240)

    run, done = asyncio.run(go())
    assert done is not None, "the run never ended"
    events = [json.loads(e.model_dump_json()) for e in run.events.events]
    assert_key_in_no_event_and_no_file(events, run.context.layout.run_dir, operator_key)


@pytest.fixture
def jp_server_config(operator_key, tmp_path):
    """The server starts with the operator's key in its environment (read once, at start-up)."""
    (tmp_path / "server_runs").mkdir()
    return {"ServerApp": {"jpserver_extensions": {"kernel_ext": True}, "ip": "127.0.0.1"},
            "BesserAgentApp": {"runs_dir": str(tmp_path / "server_runs")}}


@pytest.mark.slow
async def test_an_operator_key_the_endpoint_echoes_is_in_no_event_and_no_file_of_a_rest_run(
        jp_fetch, jp_serverapp, jp_asyncio_loop, operator_key, tmp_path):  # noqa: F811
    from kernel_ext.model.jsonform import model_to_dict
    from kernel_ext.model.loading import load_model
    from kernel_ext.server.handlers.base import STATE_KEY

    body = {"kind": "generate", "request": "A FastAPI backend", "provider": "openai", "target": "fastapi_backend",
            "approve": "all", "model_json": model_to_dict(load_model("example:library"))}
    created = await jp_fetch("besser-agent", "runs", method="POST", body=json.dumps(body))
    run_id = json.loads(created.body)["run"]["id"]
    await asyncio.wait_for(jp_serverapp.web_app.settings[STATE_KEY].manager.get(run_id).wait(), 240)
    frames = parse_sse_text((await jp_fetch("besser-agent", "runs", run_id, "events")).body.decode())
    events = [f["data"] for f in frames if "data" in f]
    assert events[-1]["type"] == "done"
    assert_key_in_no_event_and_no_file(events, tmp_path / "server_runs" / run_id, operator_key)


# -- 3. content changes: an in-place rewrite with the mtime put back ---------------------------

CALC = "def add(a, b):\n    return a + b\n\n\nLIMIT = 10\n"
REWRITTEN = CALC.replace("LIMIT = 10", "LIMIT = 99")  # same size, same inode


def rewrite_in_place_keeping_mtime(path: Path) -> None:
    """A person's editor (or a tool) saving over the file without changing its size or mtime."""
    before = os.stat(path)
    with open(path, "r+b") as handle:
        handle.write(REWRITTEN.encode())
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)


EDITS = {
    "modify_file": lambda h: {"path": "calc.py", "old_text": "return a + b", "new_text": "return b + a"},
    "replace_file_lines": lambda h: {"path": "calc.py", "read_id": h.read("calc.py"), "start_line": 2, "end_line": 2,
                                     "new_text": "    return b + a"},
    "write_file": lambda h: (h.read("calc.py"), {"path": "calc.py", "content": CALC.replace("a + b", "b + a")})[1],
}


@pytest.mark.parametrize("tool", sorted(EDITS))
def test_an_in_place_rewrite_with_the_mtime_restored_while_the_card_waits_is_stale(tmp_path, tool):
    (tmp_path / "calc.py").write_text(CALC)
    asked = []

    def card(request) -> bool:  # the host's card: while it waits, the file changes under it
        asked.append(request.name)
        rewrite_in_place_keeping_mtime(tmp_path / "calc.py")
        return True

    h = Harness(tmp_path, approver=card)
    result = h.call(tool, **EDITS[tool](h))
    assert asked == [tool], "the edit never reached the card"
    assert not result.ok and result.error.code == ErrorCode.STALE_INPUT, result.observation
    assert "content changed" in result.error.message
    assert (tmp_path / "calc.py").read_text() == REWRITTEN, "the approved edit overwrote a change it never saw"


# -- 4. the edit window: one line past it, one line before it ------------------------------------


@pytest.mark.parametrize("line, editable", [(99, False), (100, True), (109, True), (110, False)])
def test_only_lines_the_read_showed_are_editable(tmp_path, line, editable):
    (tmp_path / "long.py").write_text("".join(f"v{n} = {n}\n" for n in range(1, 201)))
    h = Harness(tmp_path)
    read = h.call("read_file", path="long.py", offset=99, limit=10)
    assert read.ok and read.data["read_id"]
    shown = [n for n in range(1, 201) if f"v{n} = {n}" in read.observation]
    assert shown == list(range(100, 110)), shown  # lines 100..109 were shown, nothing else
    arguments = {"path": "long.py", "read_id": read.data["read_id"], "start_line": line, "end_line": line,
                 "new_text": f"v{line} = -1"}
    if editable:
        assert h.call("replace_file_lines", **arguments).ok
        assert f"v{line} = -1\n" in (tmp_path / "long.py").read_text()
    else:
        refused = h.refused(ErrorCode.UNREAD_RANGE, "replace_file_lines", **arguments)
        assert str(line) in refused.observation


def test_a_range_reaching_one_line_past_the_window_is_refused_whole(tmp_path):
    (tmp_path / "long.py").write_text("".join(f"v{n} = {n}\n" for n in range(1, 201)))
    h = Harness(tmp_path)
    read_id = h.call("read_file", path="long.py", offset=99, limit=10).data["read_id"]
    h.refused(ErrorCode.UNREAD_RANGE, "replace_file_lines", path="long.py", read_id=read_id, start_line=108,
              end_line=110, new_text="x = 0\n")


# -- 5. secret-name rules: names with neither KEY nor TOKEN --------------------------------------

# A session cookie's secret, a client certificate and an API password: each caught only by the
# shell's own rules (SESSION, CERT, API_), not by the project-wide secret-name pieces.
SESSIONISH = {
    "SESSION_ID": "s3ss10n-7f9a1c2e4b6d8f0a",
    "CLIENT_CERT_PEM": "MIIBszCCAVmgAwIBAgIUQ1o2",
    "API_PASS": "hunter2-hunter2-hunter2",
}


@needs_bwrap
def test_session_cert_and_api_names_given_to_a_one_off_never_reach_its_environment(tmp_path):
    run = make_run(tmp_path)
    record = run_confined(["env"], run.ws, 30, env={**SESSIONISH, "APP_MODE": "test"}, policy="bwrap")
    assert record.exit_code == 0, record.stderr.text
    seen = dict(line.split("=", 1) for line in record.stdout.text.splitlines() if "=" in line)
    assert seen.get("APP_MODE") == "test"  # the control: a harmless extra does arrive
    assert not set(SESSIONISH) & set(seen), sorted(set(SESSIONISH) & set(seen))
    assert not any(value in record.stdout.text for value in SESSIONISH.values())
    assert record.secrets_removed >= len(SESSIONISH)


@needs_bwrap
def test_session_cert_and_api_names_in_the_servers_locale_never_reach_a_session(tmp_path, monkeypatch):
    """``LC_*`` is allowlisted (ssh forwards it from the client), so only the name rules stop these."""
    names = {f"LC_{name}": value for name, value in SESSIONISH.items()}
    for name, value in {**names, "LC_PAPER": "a4"}.items():
        monkeypatch.setenv(name, value)
    _, service, executor = shell_executor(tmp_path)
    try:
        result = executor.execute_sync(ToolCall("c1", "sh_run", {"command": "env"}))
        assert result.ok, result.observation
        seen = result.data["stdout"]
        assert "LC_PAPER=a4" in seen  # the control: the allowlisted prefix does pass
        assert not any(name in seen or value in seen for name, value in names.items()), seen
    finally:
        service.close()
