# ruff: noqa: F811 - fixtures imported from jupyter_fixtures are requested by name
"""No hostile input stalls the server: its event-loop lag stays under 100 ms while each one runs.

A real Jupyter server with the extension (pytest-jupyter, same process and loop as the test),
real runs started over REST (``POST runs``), real Phase 1, the real boundary and the real
bubblewrap shell (the operator turned shell tools on). The only fake is the LLM: an authored
script (labelled ``scripted:``), put where the request's ``provider`` spec points, that sends
each hostile input as a tool call and reacts to results (``sh_detail`` needs the id ``sh_run``
returned). ``LoopLag`` ticks on the server's loop; each case takes the largest lateness of the
ticks overlapping the window in which the input ran (cut from the run's own event stamps, or
the request's duration) and fails above ``BOUND_S`` (the issue's 100 ms). Each regex case also
asserts its outcome (the same checks as ``test_sec_regex.py``, so REST is that class's third
entry point) and that nothing outside the run changed.

``test_other_hostile_inputs_leave_the_loop_responsive`` adds the inputs whose blocking work
moved to worker threads: a FIFO present when Phase 3 snapshots the tree, and a hostile model file
loaded by the run body.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jupyter_fixtures import jp_asyncio_loop, jp_server_config, poll, runs_dir  # noqa: F401
from sandbox_fixtures import tier_param
from tornado.httpclient import HTTPClientError

from kernel_ext.providers.messages import Request
from kernel_ext.providers.scripted import Script, ScriptedProvider, Turn, call
from kernel_ext.server.handlers.base import STATE_KEY

from .loop_lag import LoopLag
from .regex_cases import (
    CATASTROPHIC,
    DETAIL_MATCHES,
    EXPECTS,
    HAYSTACK,
    HAYSTACK_FILE,
    SEARCHES,
    check_detail,
    check_expect,
    check_search,
    expect_command,
    print_haystack,
)

pytestmark = [pytest.mark.slow, pytest.mark.bwrap]
SCRIPT_SPEC = "scripted:sec-loop-lag"
RUN_TIMEOUT_S = 300


@pytest.fixture
def extension_config() -> dict:
    """The operator's choice: shell tools on, in bubblewrap (the sh_* inputs need them)."""
    return {"shell_tools_enabled": True, "sandbox_policy": "bwrap"}


@pytest.fixture
def scripts(monkeypatch, jp_root_dir) -> dict[str, Callable[[Request], Turn]]:
    """``provider: "scripted:sec-loop-lag"`` plays the responder a test puts here (the LLM's stand-in).
    The spec names a file under the server's root, as a request's files must (the request is checked
    before a run); the run plays the responder instead of that file."""
    from kernel_ext.pipeline import generation

    (jp_root_dir / SCRIPT_SPEC.partition(":")[2]).write_text('{"turns": []}')
    original = generation.provider_from_spec
    responders: dict[str, Callable[[Request], Turn]] = {}

    def chosen(spec: str | None, *, model: str | None = None, root: str | None = None) -> Any:
        if spec in responders:
            return ScriptedProvider(Script.of("sec-loop-lag", [responders[spec]] * 60))
        return original(spec, model=model, root=root)

    monkeypatch.setattr(generation, "provider_from_spec", chosen)
    return responders


class Responder:
    """Answers the planner, then plays ``steps`` in the customize loop, then ``repairs`` in Phase 3.

    A step is a Turn or a function of the request (to use an earlier result); once the steps
    are spent the task is reported blocked and the model says it is done.
    """

    def __init__(self, steps: list[Any], repairs: list[Any] = ()):
        self.steps, self.repairs = list(steps), list(repairs)
        self.planned = self.closed = False

    def __call__(self, request: Request) -> Turn:
        texts = [getattr(m, "text", "") for m in request.messages if getattr(m, "role", "") == "user"]
        if not self.planned:
            self.planned = True
            return Turn("", (call("submit_tasks", {"tasks": ["probe the tools with hostile inputs"]}),))
        queue = self.repairs if any("Phase 3, repair round" in t for t in texts) else self.steps
        if queue:
            step = queue.pop(0)
            return step if isinstance(step, Turn) else step(request)
        if not self.closed and queue is self.steps:
            self.closed = True
            return Turn("", (call("task_list", {"action": "blocked", "id": "T1", "reason": "a security probe"}),))
        return Turn("done")


def ended(run) -> bool:
    return run.task is None or run.task.done()


def manager_of(app):
    return app.web_app.settings[STATE_KEY].manager


def library_json() -> dict[str, Any]:
    from kernel_ext.model.examples import build_library_model
    from kernel_ext.model.jsonform import model_to_dict

    return model_to_dict(build_library_model())


async def start_run(jp_fetch, app, **fields: Any):
    body = {"kind": "generate", "request": "A FastAPI backend", "provider": SCRIPT_SPEC, "target": "fastapi_backend",
            "approve": "all", **fields}
    if "model_path" not in body:
        body["model_json"] = library_json()
    response = await jp_fetch("besser-agent", "runs", method="POST", body=json.dumps(body))
    assert response.code == 201
    return manager_of(app).get(json.loads(response.body)["run"]["id"])


def results_by_id(run) -> dict[str, tuple[Any, Any]]:
    """call id -> (tool_call event, tool_result event)."""
    calls = {e.call_id: e for e in run.events.events if e.type == "tool_call"}
    return {e.call_id: (calls.get(e.call_id), e) for e in run.events.events if e.type == "tool_result"}


async def stop(jp_fetch, run) -> None:
    try:
        await jp_fetch("besser-agent", "runs", run.id, "cancel", method="POST", body="{}")
    except HTTPClientError:
        pass  # already finished
    await asyncio.wait_for(run.wait(), RUN_TIMEOUT_S)


def assert_responsive(lag: LoopLag, start: float, end: float, what: str) -> None:
    assert lag.covered(start, end) >= 1, f"no tick of the loop covered {what}"
    lag.check(start, end, what)


def the_id(request: Request) -> str:
    """The command id of the latest ``sh_run`` result the request carries."""
    for message in reversed(request.messages):
        found = re.search(r"cmd-\d{8}-\d{6}-\d{5,}[0-9a-f]{4}", getattr(message, "content", "") or "")
        if found:
            return found.group(0)
    raise AssertionError("no sh_run result in the conversation")


# -- the regex class over REST ---------------------------------------------------------------------


def regex_steps(kind: str) -> tuple[list[Any], list[tuple[str, str, Any, Callable[..., None]]]]:
    """(responder steps, expected outcomes as (tool, label, expected code, check)) for one input."""
    write = Turn("", (call("write_file", {"path": HAYSTACK_FILE, "content": HAYSTACK}),))
    if kind == "search_in_files":
        turn = Turn("", tuple(call("search_in_files", {**args, "file_glob": HAYSTACK_FILE}) for _, args, _ in SEARCHES))
        return [write, turn], [("search_in_files", label, code, check_search) for label, _, code in SEARCHES]
    if kind == "sh_detail_match":
        run = Turn("", (call("sh_run", {"command": print_haystack()}),))

        def detail(request: Request) -> Turn:
            record = the_id(request)
            return Turn("", tuple(call("sh_detail", {"id": record, "selector": "stdout", "match": pattern})
                                  for _, pattern, _ in DETAIL_MATCHES))

        return [run, detail], [("sh_detail", label, code, check_detail) for label, _, code in DETAIL_MATCHES]
    turn = Turn("", tuple(call("sh_run", {"command": expect_command(label), "expect": {"stdout_matches": pattern}})
                          for label, pattern, _ in EXPECTS))
    return [turn], [("sh_run", label, code, check_expect) for label, _, code in EXPECTS]


REGEX_INPUTS = ["search_in_files", "sh_detail_match", "expect_stdout_matches"]


@pytest.mark.parametrize("policy", [tier_param("bwrap")])
@pytest.mark.parametrize("kind", REGEX_INPUTS)
async def test_a_catastrophic_regex_leaves_the_loop_responsive(jp_fetch, jp_serverapp, runs_dir, world, scripts, kind, policy):
    steps, expected = regex_steps(kind)
    scripts[SCRIPT_SPEC] = Responder(steps)
    async with LoopLag() as lag:
        run = await start_run(jp_fetch, jp_serverapp)
        wanted = {tool for tool, *_ in expected}
        count = len(expected)
        await poll(lambda: len([r for _, r in results_by_id(run).values() if r.name in wanted]) >= count or ended(run),
                   timeout=RUN_TIMEOUT_S)
        pairs = [(c, r) for c, r in results_by_id(run).values() if r.name in wanted]
        await stop(jp_fetch, run)
    assert len(pairs) >= count, [e.type for e in run.events.events][-10:]
    pairs = pairs[-count:]  # sh_detail's run is the sh_run before it, not one of the inputs
    for (tool_call, result), (tool, label, code, check) in zip(pairs, expected):
        assert result.name == tool and tool_call is not None
        assert_responsive(lag, tool_call.ts, result.ts, f"{tool} {label}")
        if check is check_expect:
            check(label, code, result.ok, result.error_code, result.summary)
        else:
            check(label, code, result.ok, result.error_code, result.data)
    sent = [v for c, _ in pairs for v in c.arguments.values()]
    assert CATASTROPHIC in [*sent, *[x for v in sent if isinstance(v, dict) for x in v.values()]]  # it was the input
    assert world.unchanged()


# -- a body nested 100,000 deep ---------------------------------------------------------------------


@pytest.mark.parametrize("route", ["runs", "approvals"])
async def test_a_deeply_nested_body_is_refused_by_name_and_leaves_the_loop_responsive(jp_fetch, jp_serverapp, runs_dir, world, route):
    parts = ("runs",) if route == "runs" else ("runs", "20250101-000000-abcdef", "approvals", "call-1")
    before = sorted(p.name for p in runs_dir.iterdir())
    async with LoopLag() as lag:
        start = time.time()
        with pytest.raises(HTTPClientError) as refused:
            await jp_fetch("besser-agent", *parts, method="POST", body="[" * 100_000)
        end = time.time()
    assert refused.value.code == 400
    answer = json.loads(refused.value.response.body)
    assert answer["code"] == "JSON_TOO_DEEP" and "\n" not in answer["message"], answer
    assert_responsive(lag, start, end, f"POST {'/'.join(parts)} with 100,000 nested '['")
    assert sorted(p.name for p in runs_dir.iterdir()) == before
    assert world.unchanged()


# -- slots for the inputs other branches move off the loop -------------------------------------------


def hostile_model(folder: Path) -> Path:
    """451 bytes of safe Python that build a 64 MB name by doubling (G0 finding 6, scaled down)."""
    lines = ["from besser.BUML.metamodel.structural import Class, DomainModel, Property, StringType",
             'a = "abcdefghabcdefgh"', *["a = a + a"] * 22,
             'book = Class(name="Book", attributes={Property(name="title", type=StringType)})',
             "model = DomainModel(name=a, types={book})"]
    path = folder / "hostile_model.py"
    path.write_text("\n".join(lines) + "\n")
    return path


SLOTS = ["fifo_in_phase3", "model_loading"]


@pytest.mark.parametrize("policy", [tier_param("bwrap")])
@pytest.mark.parametrize("kind", SLOTS)
async def test_other_hostile_inputs_leave_the_loop_responsive(jp_fetch, jp_serverapp, runs_dir, world, scripts, tmp_path, jp_root_dir, kind, policy):
    if kind == "model_loading":
        scripts[SCRIPT_SPEC] = Responder([])
        async with LoopLag() as lag:
            start = time.time()
            run = await start_run(jp_fetch, jp_serverapp, model_path=str(hostile_model(jp_root_dir)))
            await poll(lambda: any(e.type in ("phase", "error", "done") and getattr(e, "phase", "") != "select"
                                   for e in run.events.events), timeout=RUN_TIMEOUT_S)
            end = time.time()
            await stop(jp_fetch, run)
        assert_responsive(lag, start, end, "loading a hostile model file")
    else:
        # The model leaves a blocker (an undefined name), Phase 3 asks for a repair, and the
        # repair makes a FIFO: the next digest of the tree must not read it on the loop.
        broken = Turn("", (call("write_file", {"path": "backend/broken_probe.py", "content": "value = undefined_probe_name\n"}),))
        fifo = Turn("", (call("sh_run", {"command": "mkfifo probe.fifo"}),))
        scripts[SCRIPT_SPEC] = Responder([broken], repairs=[fifo])
        async with LoopLag() as lag:
            run = await start_run(jp_fetch, jp_serverapp)
            made = await poll(lambda: [r for _, r in results_by_id(run).values() if r.name == "sh_run"] or ended(run),
                              timeout=RUN_TIMEOUT_S)
            start = made[0].ts if isinstance(made, list) else time.time()
            await asyncio.wait_for(run.wait(), RUN_TIMEOUT_S)
            end = time.time()
        assert_responsive(lag, start, end, "Phase 3 after a repair made a FIFO")
    assert world.unchanged()


# -- a command built to be the policy's worst case -------------------------------------------------


def policy_worst_cases(many_segments: bool = False) -> dict[str, str]:
    """Commands at the length cap shaped for the command policy's split and denylist and sh_plan's classifier.

    ``shlex`` took ~20 s on the one long word and the backtracking denylist minutes (its fork
    bomb pattern retried every suffix of a word); each shape exits at once in the sandbox. The
    heap is frozen (``frozen_heap``): a full collection of pytest's own heap takes ~140 ms here,
    and planning 21,845 words allocates enough to trigger several.
    """
    from kernel_ext.sandbox.shtools.options import MAX_COMMAND_CHARS as cap

    def fill(piece: str, head: str = "") -> str:
        return head + (piece * cap)[: cap - len(head)]

    if many_segments:  # for sh_plan only (never run): 32,768 segments, ~1 s of planning
        return {"many segments": fill("a;")}
    return {"one word": fill("a"), "short words": fill(" dd", "dd"), "quotes": fill("''"),
            "backslashes": fill("\\a"), "double quotes": fill('"\\""'), "punctuation": fill(";")}


@pytest.mark.parametrize("policy", [tier_param("bwrap")])
@pytest.mark.parametrize("tool", [
    "run_command", "sh_run", "sh_plan",
    pytest.param("sh_plan:many_segments", marks=pytest.mark.xfail(strict=False, reason=(
        "known gap: planning 32,768 segments (~1 s, off the loop) still lags the loop 100-470 ms; full collections "
        "of ~120 ms were logged in the window (the collector holds the GIL): fewer allocations per segment, not pinned down"))),
])
async def test_a_command_at_the_length_cap_leaves_the_loop_responsive(jp_fetch, jp_serverapp, runs_dir, world, scripts, tool, policy,
                                                                      frozen_heap):
    tool, _, shape = tool.partition(":")
    cases = policy_worst_cases(many_segments=bool(shape))
    scripts[SCRIPT_SPEC] = Responder([Turn("", (call(tool, {"command": command}),)) for command in cases.values()])
    async with LoopLag() as lag:
        run = await start_run(jp_fetch, jp_serverapp)
        await poll(lambda: len([r for _, r in results_by_id(run).values() if r.name == tool]) >= len(cases) or ended(run),
                   timeout=RUN_TIMEOUT_S)
        pairs = [(c, r) for c, r in results_by_id(run).values() if r.name == tool]
        await stop(jp_fetch, run)
    assert len(pairs) == len(cases), [e.type for e in run.events.events][-10:]
    for (tool_call, result), (label, command) in zip(pairs, cases.items()):
        assert tool_call.arguments["command"][:1000] == command[:1000]  # it was the input (events clip long text)
        # the policy let it through (none is on the denylist) and the sandbox ran it, or sh_plan planned it
        assert result.error_code not in ("invalid_argument", "command_denied", "too_large"), (label, result.summary)
        assert_responsive(lag, tool_call.ts, result.ts, f"{tool} with a {len(command)}-character command of {label}")
    assert world.unchanged()
