# ruff: noqa: F811 - fixtures imported from provider_server are requested by name
"""What the endpoint names cannot steer the host: the price, a tool's name, a call's id, nesting, text direction.

The end-to-end cases (CLI, Python API, notebook run view, REST) live in
``test_sec_endpoint_streams.py`` over ``tests/misbehaving_endpoint.py``. Here, each seam that
holds the class for every path, driven through a real loopback endpoint where one is involved
(authored turns, not a live LLM):

- price: the configured model prices every call, whatever the stream names; a cost cap over an
  unpriced configured model is refused at the provider (``COST_UNPRICED``, nothing sent), and a
  run under only the default cap says once that the cap cannot apply (non-terminal);
- names and ids: past the stream, ``admit`` clips a name and replaces an oversized wire id, and the
  Executor's refusal of an unknown 5 MB name quotes 128 characters of it;
- depth: arguments nested past ``MAX_JSON_DEPTH`` are refused by name at the boundary (nothing
  written), and no walker an event passes through (``safe_value``, ``valid_unicode``, ``redact``,
  ``report_call``) can raise ``RecursionError``, however deep;
- text direction: ``shown_text`` escapes every separator and format character (checked against
  ``unicodedata``), and the run view's HTML and text carry none raw.
"""

from __future__ import annotations

import asyncio
import json
import re
import unicodedata

import pytest
from provider_server import loopback_only, server  # noqa: F401

from kernel_ext.boundary import ExecutionPolicy, Executor
from kernel_ext.boundary.calls import ToolCall
from kernel_ext.hosting.bus import EventLog
from kernel_ext.hosting.events import make_event
from kernel_ext.pipeline.reporting import report_call
from kernel_ext.providers.events import ProviderError
from kernel_ext.providers.messages import Conversation, ToolUse, admit
from kernel_ext.providers.meter import CostMeter
from kernel_ext.providers.openai_compat import OpenAICompatProvider
from kernel_ext.safejson import MAX_JSON_DEPTH, deeper_than
from kernel_ext.safetext import (
    DEEP,
    MAX_CALL_ID_CHARS,
    MAX_TOOL_NAME_CHARS,
    safe_value,
    shown_text,
    valid_unicode,
)
from kernel_ext.secrets import redact
from kernel_ext.tools.base import ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.workspace import Workspace

from .hostile_endpoint import KEY, NO_RETRY, PROTOCOLS, provider, tree, turn

MB = 1024 * 1024


def _conversation() -> Conversation:
    conversation = Conversation(system="s")
    conversation.user("hi")
    return conversation


# -- price ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_the_configured_model_prices_the_call_whatever_the_stream_names(protocol, server):
    meter = CostMeter()
    live = provider(protocol, server, meter)
    plan = turn(protocol, ["hello"], usage={"input": 1_000_000, "output": 0})
    renamed = [re.sub(rb'"model": "[^"]*"', b'"model": "my-free-model"', c) for c in plan.chunks]
    assert renamed != plan.chunks  # the stream names another model
    plan.chunks = renamed
    server.plan(plan, plan)
    reply = await live.complete(_conversation())
    expected = meter.pricing.cost(live.model, reply.usage)
    assert expected and reply.cost_usd == pytest.approx(expected) and meter.unpriced_usage.total_tokens == 0
    notes = meter.take_notices()
    assert [code for code, _ in notes] == ["MODEL_MISMATCH"] and "my-free-model" in notes[0][1]
    await live.complete(_conversation())
    assert meter.take_notices() == []  # noted once per name


async def test_a_cost_cap_over_an_unpriced_model_is_refused_before_sending(server):
    live = OpenAICompatProvider(model="my-local-model", base_url=server.url + "/v1", api_key=KEY, retry=NO_RETRY,
                                meter=CostMeter(cap_usd=0.5))
    server.plan(turn("openai", ["hello"]))
    with pytest.raises(ProviderError) as refused:
        await live.complete(_conversation())
    assert refused.value.code == "cost_unpriced" and "my-local-model" in refused.value.message
    assert server.requests == []
    uncapped = OpenAICompatProvider(model="my-local-model", base_url=server.url + "/v1", api_key=KEY, retry=NO_RETRY)
    assert (await uncapped.complete(_conversation())).text == "hello"  # no cap: a local model runs as before


def test_under_the_default_cap_an_unpriced_model_is_said_once_and_runs(server, tmp_path, monkeypatch):
    """No explicit cap (the run's default $2): a named, non-terminal notice; the model is called."""
    from kernel_ext.pipeline.generation import generate

    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("BESSER_LLM_MODEL", "my-local-model")
    server.plan(*[turn("openai", ["nothing to do"]) for _ in range(8)])

    async def go():
        run = generate("example:library", "Pydantic classes", run_dir=tmp_path / "run", provider="openai", target="pydantic")
        return await asyncio.wait_for(run.wait(), 60), run

    done, run = asyncio.run(go())
    notes = [e for e in run.events.events if e.type == "error" and e.code == "COST_UNPRICED"]
    assert len(notes) == 1 and not notes[0].terminal and "default cost cap" in notes[0].message
    assert server.requests and done.status in ("completed", "blocked")


# -- names and ids ----------------------------------------------------------------------------------


def test_admit_clips_names_and_replaces_oversized_wire_ids():
    ids = iter(f"c{i}" for i in range(1, 10))
    calls = admit([ToolUse("i" * (5 * MB), "n" * (5 * MB)), ToolUse("x" * MAX_CALL_ID_CHARS, "write_file")], lambda: next(ids))
    assert calls[0].id == "c1" and len(calls[0].name) < MAX_TOOL_NAME_CHARS + 40 and calls[0].name.startswith("n" * 128)
    assert calls[1].id == "x" * MAX_CALL_ID_CHARS and calls[1].name == "write_file"  # at the limit: kept


def test_an_unknown_5mb_name_is_quoted_clipped_by_the_executor(tmp_path):
    executor = Executor(default_catalog(), ToolContext(services={"workspace": Workspace(tmp_path)}))
    result = executor.execute_sync(ToolCall("c1", "w" * (5 * MB), "{}"))
    assert not result.ok and result.error.code == "unknown_tool"
    assert len(result.observation) < 4000 and len(result.name) < MAX_TOOL_NAME_CHARS + 40


# -- depth --------------------------------------------------------------------------------------------


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH + 1, 300, 500, 5000])
def test_deep_arguments_are_refused_by_name_and_nothing_recurses(depth, tmp_path):
    (tmp_path / "keep.py").write_text("K = 1\n")
    before = tree(tmp_path)
    text = json.dumps({"path": "deep.py", "content": "X = 1\n"})[:-1] + ', "extra": ' + "[" * depth + "]" * depth + "}"
    executor = Executor(default_catalog(), ToolContext(services={"workspace": Workspace(tmp_path)}),
                        policy=ExecutionPolicy.allowing(["edit"]), approver=lambda request: True)
    result = executor.execute_sync(ToolCall("c1", "write_file", text))
    assert not result.ok and tree(tmp_path) == before
    # the outer object is one level: the array inside it makes depth + 1
    too_deep = depth + 1 > MAX_JSON_DEPTH
    assert (result.error.code == "arguments_too_deep") is too_deep, result.error
    call = ToolUse("w1", "write_file", text, host_id="c1")
    assert (call.parsed() is None) is too_deep
    events = EventLog("r", None)
    report_call(events, call.to_call())  # an event with the arguments summarised, never EVENT_INVALID
    shown = events.events[-1]
    assert shown.type == "tool_call" and ("_omitted" in shown.arguments) is too_deep, shown


@pytest.mark.parametrize("walk", [safe_value, valid_unicode, redact])
def test_no_walker_an_event_passes_through_recurses_without_bound(walk):
    deep = {"a": _nested(20_000)}
    shown = json.dumps(walk(deep))
    assert DEEP in shown and len(shown) < 2_000
    assert deeper_than(deep) and not deeper_than({"a": _nested(MAX_JSON_DEPTH - 1)})
    event = make_event("tool_result", "r", call_id="c1", name="x", ok=True, data=deep)
    assert DEEP in event.model_dump_json()


def test_the_rest_body_parser_draws_the_line_where_the_boundary_does():
    from kernel_ext.server.handlers.base import Refusal, parse_json_body

    def nested(depth: int) -> bytes:
        return ("[" * (depth - 1) + "{}" + "]" * (depth - 1)).encode()

    assert not deeper_than(json.loads(nested(MAX_JSON_DEPTH))) and deeper_than(json.loads(nested(MAX_JSON_DEPTH + 1)))
    assert parse_json_body(nested(MAX_JSON_DEPTH)) is not None
    with pytest.raises(Refusal) as refused:
        parse_json_body(nested(MAX_JSON_DEPTH + 1))
    assert refused.value.code == "JSON_TOO_DEEP"


# -- text direction -------------------------------------------------------------------------------------


def test_every_separator_and_format_character_is_shown_as_an_escape():
    """ZWNJ / ZWJ too (issue 28, item 9): between a key's characters they hide its seams."""
    for code in range(0x110000):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF:
            continue
        category = unicodedata.category(char)
        if category in ("Cf", "Zl", "Zp"):
            assert char not in shown_text(f"a{char}b"), hex(code)
    assert shown_text("\u202eevil") == "\\u202eevil" and shown_text("plain é 非 ☃") == "plain é 非 ☃"


def test_the_run_view_shows_bidi_controls_and_separators_escaped():
    from widgets.runview import RunView

    spoof = "paid \u202e$0.01\u202c, \u2066rtl\u2069, line\u2028two\x85three"
    view = RunView(run_id="r-1", decide=lambda *a, **k: None, note="in-process")
    shown = (("run_started", {"request": spoof, "provider_label": "p", "provider_kind": "live"}),
             ("text", {"text": spoof}),
             ("tool_call", {"call_id": "c1", "name": "write_file", "summary": spoof, "arguments": {"path": spoof}}))
    for seq, (type_, fields) in enumerate(shown, start=1):
        view.apply(make_event(type_, "r-1", **fields).model_copy(update={"seq": seq}))
    for rendered in (view.to_html(), str(view), view._repr_mimebundle_()["text/plain"]):  # what a page or a terminal shows
        assert not [c for c in "\u202e\u202c\u2066\u2069\u2028\x85" if c in rendered], rendered[-500:]
    assert "\\u202e" in view.to_html()
