"""Recording a live session to a cassette, replaying it offline, divergence, and scripted providers."""

from __future__ import annotations

import json

import pytest
from provider_server import Plan, json_error, loopback_only, openai_stream, server  # noqa: F401

from kernel_ext.boundary.calls import CallIds
from kernel_ext.errors import ErrorCode
from kernel_ext.providers import Conversation, CostMeter, ProviderConfig, ProviderError, build_provider
from kernel_ext.providers.events import Stop, TextDelta, ToolCallDone, UsageUpdate
from kernel_ext.providers.messages import admit
from kernel_ext.providers.openai_compat import OpenAICompatProvider
from kernel_ext.providers.replay import ReplayProvider, first_difference
from kernel_ext.providers.retry import RetryPolicy
from kernel_ext.providers.scripted import Script, ScriptedProvider, Turn, call

KEY = "sk-test-Rc4Jx8Mv2Qb6Tn9Wd3Kp5Lz7"
ARGS = json.dumps({"path": "app/main.py"})
USAGE = {"prompt_tokens": 500, "completion_tokens": 40, "total_tokens": 540}
TOOLS = [{"name": "read_file", "description": "Read a file.", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]


def live(server):
    return OpenAICompatProvider(
        model="gpt-4o-mini", base_url=server.url + "/v1", api_key=KEY, retry=RetryPolicy(base_delay=0.01, jitter=False)
    )


def plan_session(server):
    server.plan(
        Plan(chunks=openai_stream(["Reading first."], [("call_1", "read_file", [ARGS[:7], ARGS[7:]])], usage=USAGE)),
        Plan(chunks=openai_stream(["It prints ", "hello."], finish="stop", usage=USAGE)),
    )


async def session(provider, observation="print('hello')", tools=TOOLS):
    """The same two-step conversation a run would have: ask, run the tool, ask again."""
    conv = Conversation(system="You are careful.")
    conv.user(f"What does main.py print? (my key is {KEY}, oops)")
    outputs = []
    for step in range(2):
        events = [e async for e in provider.stream(conv, tools)]
        outputs.append(events)
        text = "".join(e.text for e in events if isinstance(e, TextDelta))
        calls = [e.call for e in events if isinstance(e, ToolCallDone)]
        conv.assistant(text, calls)
        for c in calls:
            conv.tool_result(c.id, c.name, observation)
    return conv, outputs


def shape(events):
    """Events as replay reproduces them (text chunking aside)."""
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    rest = [e for e in events if not isinstance(e, TextDelta)]
    return text, rest


@pytest.fixture
async def cassette(server, tmp_path):
    path = tmp_path / "cassettes" / "session.jsonl"
    plan_session(server)
    p = live(server)
    p.record(path)
    try:
        _, outputs = await session(p)
    finally:
        await p.aclose()
    return path, outputs


async def test_recording_writes_exchanges_and_never_the_key(cassette, server):
    path, _ = cassette
    text = path.read_text()
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) == 3
    assert lines[0]["cassette"] == 1 and lines[0]["recorded_from"]["label"] == "openai:gpt-4o-mini"
    assert lines[0]["recorded_from"]["endpoint"] == server.url + "/v1"
    assert KEY not in text and KEY[8:20] not in text
    for word in ("authorization", "Bearer", "x-api-key"):
        assert word.lower() not in text.lower()
    assert "[redacted]" in lines[1]["append"][0]["text"]  # the key pasted into a prompt is cut too
    second = lines[2]
    assert second["keep"] == 1 and [m["role"] for m in second["append"]] == ["assistant", "tool"]
    assert "system" not in second  # unchanged system prompt is stored once
    assert second["tools"][0]["name"] == "read_file" and len(second["tools"][0]["sha256"]) == 16


async def test_replay_reproduces_the_session_offline(cassette, server):
    path, recorded = cassette
    before = len(server.requests)
    replay = ReplayProvider(path)
    assert replay.kind == "replay" and replay.label == "replay:session.jsonl"
    info = replay.describe()
    assert info["recorded_from"] == "openai:gpt-4o-mini" and "not a live model" in info["notice"]
    _, replayed = await session(replay)
    assert len(server.requests) == before  # nothing was sent
    for live_events, replay_events in zip(recorded, replayed):
        assert shape(live_events) == shape(replay_events)
    usage = next(e for e in replayed[0] if isinstance(e, UsageUpdate))
    assert usage.cost_usd == pytest.approx((500 * 0.15 + 40 * 0.60) / 1_000_000)


async def test_divergence_names_where_and_what(cassette):
    path, _ = cassette
    replay = ReplayProvider(path)
    with pytest.raises(ProviderError) as caught:
        await session(replay, observation="print('goodbye')")
    error = caught.value
    assert error.code == ErrorCode.REPLAY_DIVERGED
    assert "request #2" in error.message and "session.jsonl" in error.message
    assert "request.messages[2].content" in error.message
    assert "this machine's result of read_file differs from the recording's" in error.message  # said in words
    assert "here \"print('goodbye')\"; recorded \"print('hello')\"" in error.message
    assert "\n" not in error.message  # one line
    assert {k: error.data[k] for k in ("exchange", "path", "cause")} == {"exchange": 2, "path": "request.messages[2].content", "cause": "tool_result"}
    assert "hello" in error.data["recorded"] and "goodbye" in error.data["sent"]


async def test_lenient_replay_ignores_tool_output_only(cassette):
    path, _ = cassette
    _, replayed = await session(ReplayProvider(path, strict=False), observation="print('goodbye')")
    assert isinstance(replayed[1][-1], Stop)
    other_tools = [{**TOOLS[0], "description": "Read any file."}]
    with pytest.raises(ProviderError) as caught:
        await session(ReplayProvider(path, strict=False), tools=other_tools)
    assert "request.tools[0].sha256" in caught.value.message


async def test_running_past_the_cassette(cassette):
    path, _ = cassette
    replay = ReplayProvider(path)
    conv, _ = await session(replay)
    with pytest.raises(ProviderError) as caught:
        await replay.complete(conv)
    assert caught.value.code == ErrorCode.REPLAY_DIVERGED
    assert "request #3 goes beyond cassette session.jsonl, which holds 2 exchange(s)" in caught.value.message


async def test_a_recorded_error_replays_as_the_same_error(server, tmp_path):
    server.plan(json_error(400, {"error": {"message": "context too long", "type": "invalid_request_error"}}))
    path = tmp_path / "error.jsonl"
    config = ProviderConfig.from_env({"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": server.url + "/v1"})
    p = build_provider(config, record=path)
    conv = Conversation()
    conv.user("hi")
    with pytest.raises(ProviderError) as live_error:
        await p.complete(conv)
    await p.aclose()
    replay = build_provider(ProviderConfig.from_env({"BESSER_LLM_PROVIDER": "replay", "BESSER_LLM_CASSETTE": str(path)}))
    with pytest.raises(ProviderError) as replayed:
        await replay.complete(conv)
    assert (replayed.value.code, replayed.value.message) == (live_error.value.code, live_error.value.message)
    assert replayed.value.code == ErrorCode.BAD_REQUEST


async def test_replay_prices_recorded_usage_so_a_cost_cap_behaves_as_live(cassette):
    path, _ = cassette
    replay = ReplayProvider(path, meter=CostMeter(cap_usd=0.00001))
    with pytest.raises(ProviderError) as caught:
        await session(replay)
    assert caught.value.code == ErrorCode.COST_CAP and replay.position == 1


def test_unreadable_cassettes_are_named(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"cassette": 1}\nnot json\n')
    with pytest.raises(ProviderError) as caught:
        ReplayProvider(bad)
    assert caught.value.code == ErrorCode.NOT_CONFIGURED and "line 2" in caught.value.message
    with pytest.raises(ProviderError) as caught:
        ReplayProvider(tmp_path / "missing.jsonl")
    assert caught.value.code == "not_found" and "cassette" in caught.value.message


def test_first_difference():
    assert first_difference({"a": [1, 2]}, {"a": [1, 2]}) is None
    assert first_difference({"a": [1, 2]}, {"a": [1]}) == ("request.a (length)", "2 item(s)", "1 item(s)")
    where, old, new = first_difference({"s": "x" * 100 + "A"}, {"s": "x" * 100 + "B"})
    assert where == "request.s" and old.endswith('A"') and "at character 100" in new
    assert first_difference({"a": 1}, {"a": 1, "b": 2}) == ("request.b", "nothing", "2")


async def test_scripted_provider_plays_authored_turns():
    script = Script.of(
        "lesson-1",
        [
            Turn("Let me read the model.", (call("read_file", {"path": "model.py"}), call("list_files"))),
            lambda request: Turn(f"The file says: {request.messages[-2].content}"),
        ],
    )
    p = ScriptedProvider(script)
    assert p.kind == "scripted" and p.label == "scripted:lesson-1"
    assert "not a live model" in p.describe()["notice"]
    conv = Conversation()
    conv.user("Explain the model")
    first = await p.complete(conv, TOOLS)
    assert first.text == "Let me read the model." and first.stop_reason == "tool_use"
    assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [
        ("lesson-1-1-1", "read_file", '{"path": "model.py"}'),
        ("lesson-1-1-2", "list_files", "{}"),
    ]
    admitted = admit(first.tool_calls, CallIds().mint)  # the host's ids; the script's stay on the wire
    assert [(c.host_id, c.id) for c in admitted] == [("c1", "lesson-1-1-1"), ("c2", "lesson-1-1-2")]
    tool_call = admitted[0].to_call()  # what the Executor takes
    assert (tool_call.id, tool_call.arguments) == ("c1", '{"path": "model.py"}')
    conv.assistant(first.text, first.tool_calls)
    conv.tool_result("lesson-1-1-1", "read_file", "class Book")
    conv.tool_result("lesson-1-1-2", "list_files", "model.py")
    second = await p.complete(conv)
    assert second.text == "The file says: class Book" and second.stop_reason == "end"
    with pytest.raises(ProviderError) as caught:
        await p.complete(conv)
    assert caught.value.code == ErrorCode.REPLAY_DIVERGED and "has 2 turn(s); the run asked for turn 3" in caught.value.message


async def test_scripted_from_file_through_the_factory(tmp_path):
    path = tmp_path / "demo.json"
    path.write_text(json.dumps({"name": "demo", "turns": [{"text": "hello there", "usage": {"input_tokens": 3, "output_tokens": 2}}]}))
    p = build_provider(ProviderConfig.from_env({"BESSER_LLM_PROVIDER": "scripted", "BESSER_LLM_SCRIPT": str(path)}))
    conv = Conversation()
    conv.user("hi")
    events = [e async for e in p.stream(conv)]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["hello ", "there"]
    usage = next(e for e in events if isinstance(e, UsageUpdate))
    assert usage.cost_usd is None and p.meter.unpriced_usage.total_tokens == 5
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ProviderError) as caught:
        build_provider(ProviderConfig.from_env({"BESSER_LLM_PROVIDER": "scripted", "BESSER_LLM_SCRIPT": str(bad)}))
    assert caught.value.code == ErrorCode.NOT_CONFIGURED and "KeyError" in caught.value.message
