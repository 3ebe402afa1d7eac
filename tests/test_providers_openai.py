"""OpenAI-compatible provider against a real loopback server speaking Chat Completions SSE."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from provider_server import Plan, fragments, json_error, loopback_only, openai_stream, rechunk, server  # noqa: F401

from kernel_ext.errors import ErrorCode
from kernel_ext.providers import Conversation, CostMeter, ProviderError, ToolUse
from kernel_ext.providers.events import Retrying, Stop, TextDelta, ToolCallDone, UsageUpdate
from kernel_ext.providers.openai_compat import OpenAICompatProvider
from kernel_ext.providers.retry import RetryPolicy
from kernel_ext.tools.base import Category, ToolArgs, ToolOutcome, ToolSpec

KEY = "sk-test-Zq8wVn3Lr5Tk2Pj7Hd4Mb6Xc9"
FAST = RetryPolicy(base_delay=0.01, max_delay=0.02, jitter=False)


class ReadArgs(ToolArgs):
    path: str
    max_lines: int = 200


class EditArgs(ToolArgs):
    path: str
    old: str
    new: str


READ = ToolSpec("read_file", Category.READ, ReadArgs, "Read a text file.", run=lambda a, c: ToolOutcome("x"))
EDIT = ToolSpec("edit_file", Category.EDIT, EditArgs, "Replace text in a file.", run=lambda a, c: ToolOutcome("x"))

ARGS_1 = json.dumps({"path": "app/main.py", "max_lines": 40})
ARGS_2 = json.dumps({"path": "app/models.py", "old": "name: str", "new": "name: str  # \"quoted\" é ✓"}, ensure_ascii=False)
USAGE = {"prompt_tokens": 1200, "completion_tokens": 80, "total_tokens": 1280, "prompt_tokens_details": {"cached_tokens": 200}}


def provider(server, key=KEY, model="gpt-4o-mini", **kwargs):
    kwargs.setdefault("retry", FAST)
    return OpenAICompatProvider(model=model, base_url=server.url + "/v1", api_key=key, **kwargs)


def conversation() -> Conversation:
    conv = Conversation(system="You are a careful engineer.")
    conv.user("Add a docstring to main.py")
    return conv


async def drain(p, conv, tools=(), **kwargs):
    return [e async for e in p.stream(conv, tools, **kwargs)]


def text_of(events):
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def test_text_and_two_tool_calls_reassembled_exactly(server):
    calls = [("call_a1", "read_file", fragments(ARGS_1, 3)), ("call_b2", "edit_file", fragments(ARGS_2, 2))]
    body = openai_stream(["I will ", "read ", "then edit."], calls, usage=USAGE)
    server.plan(Plan(chunks=rechunk(body, 7)))  # tiny HTTP chunks, cutting events and UTF-8 apart
    p = provider(server)
    events = await drain(p, conversation(), [READ, EDIT])
    await p.aclose()

    assert text_of(events) == "I will read then edit."
    done = [e.call for e in events if isinstance(e, ToolCallDone)]
    assert [(c.id, c.name, c.arguments) for c in done] == [("call_a1", "read_file", ARGS_1), ("call_b2", "edit_file", ARGS_2)]
    assert done[1].parsed()["new"].endswith("é ✓")
    kinds = [e.kind for e in events]
    assert kinds[-2:] == ["usage", "stop"] and kinds.count("stop") == 1
    assert events[-1] == Stop("tool_use", "tool_calls")
    # every argument piece was a separate SSE event
    assert len(server.requests) == 1 and len(body) > 40


async def test_request_is_chat_completions_with_tools_from_tool_specs(server):
    server.plan(Plan(chunks=openai_stream(["ok"], finish="stop")))
    conv = conversation()
    conv.assistant("Reading.", [ToolUse("call_1", "read_file", ARGS_1)])
    conv.tool_result("call_1", "read_file", "print('hi')")
    conv.tool_result("call_2", "edit_file", "error [stale_input]: changed", is_error=True)
    p = provider(server)
    await drain(p, conv, [READ, EDIT])
    await p.aclose()

    seen = server.requests[0]
    assert seen.method == "POST" and seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    body = seen.body
    assert body["model"] == "gpt-4o-mini" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["tools"][0] == {
        "type": "function",
        "function": {"name": "read_file", "description": "Read a text file.", "parameters": READ.json_schema()},
    }
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "tool"]
    assert body["messages"][2]["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": ARGS_1}}
    ]
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "print('hi')"}
    assert "max_tokens" not in body and "max_completion_tokens" not in body


async def test_usage_and_cost_from_the_bundled_table(server):
    server.plan(Plan(chunks=openai_stream(["a"], finish="stop", usage=USAGE)), Plan(chunks=openai_stream(["b"], finish="stop", usage=USAGE)))
    meter = CostMeter()
    p = provider(server, meter=meter)
    first = await p.complete(conversation())
    second = await p.complete(conversation())
    await p.aclose()

    expected = (1000 * 0.15 + 200 * 0.075 + 80 * 0.60) / 1_000_000  # gpt-4o-mini, per million tokens
    assert first.usage.input_tokens == 1000 and first.usage.cache_read_tokens == 200 and first.usage.output_tokens == 80
    assert first.cost_usd == pytest.approx(expected)
    assert second.cost_usd == pytest.approx(expected)
    assert meter.cost_usd == pytest.approx(2 * expected)
    assert meter.calls == 2 and meter.usage.output_tokens == 160


async def test_unknown_model_has_unknown_cost_not_zero(server):
    server.plan(Plan(chunks=openai_stream(["hi"], finish="stop", usage=USAGE, model="llama3.1:8b")))
    p = provider(server, key=None, model="llama3.1:8b")
    events = await drain(p, conversation())
    await p.aclose()
    usage = next(e for e in events if isinstance(e, UsageUpdate))
    assert usage.cost_usd is None and usage.model == "llama3.1:8b"
    assert p.meter.unpriced_models == {"llama3.1:8b"} and p.meter.unpriced_usage.output_tokens == 80
    assert "authorization" not in server.requests[0].headers  # a keyless local server gets no auth header


async def test_429_then_success_is_retried_and_counted(server):
    server.plan(
        json_error(429, {"error": {"message": "Rate limit reached", "type": "requests"}}, {"retry-after": "0"}),
        Plan(chunks=openai_stream(["fine"], finish="stop")),
    )
    p = provider(server)
    events = await drain(p, conversation())
    await p.aclose()
    retries = [e for e in events if isinstance(e, Retrying)]
    assert len(retries) == 1 and retries[0].attempt == 1 and retries[0].delay == 0
    assert retries[0].code == ErrorCode.UPSTREAM_LLM and "HTTP 429" in retries[0].reason
    assert p.retries == 1 and len(server.requests) == 2
    assert text_of(events) == "fine"


async def test_5xx_retries_are_bounded(server):
    server.plan(*[json_error(503, {"error": {"message": "overloaded"}}) for _ in range(3)])
    p = provider(server, retry=RetryPolicy(max_retries=2, base_delay=0.01, jitter=False))
    with pytest.raises(ProviderError) as caught:
        await drain(p, conversation())
    await p.aclose()
    assert caught.value.code == ErrorCode.UPSTREAM_LLM
    assert "HTTP 503" in caught.value.message and "after 2 retries" in caught.value.message
    assert len(server.requests) == 3 and p.retries == 2


async def test_retry_after_beyond_the_limit_fails_at_once(server):
    server.plan(json_error(429, {"error": {"message": "quota"}}, {"retry-after": "3600"}))
    p = provider(server)
    with pytest.raises(ProviderError) as caught:
        await drain(p, conversation())
    await p.aclose()
    assert caught.value.code == ErrorCode.UPSTREAM_LLM and "asks to wait 3600s" in caught.value.message
    assert len(server.requests) == 1


async def test_invalid_key_maps_to_INVALID_KEY_and_the_key_is_nowhere(server, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, httpx and httpcore included
    server.require_key("openai", "sk-the-right-one-000000000000")
    p = provider(server)
    with pytest.raises(ProviderError) as caught:
        await drain(p, conversation())
    await p.aclose()
    error = caught.value
    assert error.code == ErrorCode.INVALID_KEY
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it was sent...
    texts = [str(error), repr(error), error.message, *map(str, error.args), json.dumps(error.data), caplog.text]
    texts += [repr(p), json.dumps(p.describe())]
    for text in texts:  # ...and appears nowhere, not even in part
        assert KEY not in text and KEY[8:20] not in text
    assert "HTTP 401" in error.message and "OPENAI_API_KEY" in error.message
    assert error.__cause__ is None and error.__context__ is None
    assert len(server.requests) == 1  # a rejected key is not retried


async def test_bad_request_keeps_the_upstream_message_redacted(server):
    body = {"error": {"message": f"model 'gpt-9' does not exist (key {KEY})", "type": "invalid_request_error"}}
    server.plan(json_error(404, body))
    p = provider(server, model="gpt-9")
    with pytest.raises(ProviderError) as caught:
        await drain(p, conversation())
    await p.aclose()
    assert caught.value.code == ErrorCode.BAD_REQUEST
    assert "model 'gpt-9' does not exist" in caught.value.message and KEY not in caught.value.message
    assert len(server.requests) == 1


async def test_disconnect_mid_stream_is_UPSTREAM_LLM_after_the_text_so_far(server):
    body = openai_stream(["partial ", "answer ", "never finished"], finish="stop")
    server.plan(Plan(chunks=body, disconnect_after=3))
    p = provider(server)
    seen = []
    with pytest.raises(ProviderError) as caught:
        async for event in p.stream(conversation()):
            seen.append(event)
    await p.aclose()
    assert caught.value.code == ErrorCode.UPSTREAM_LLM and "dropped mid-stream" in caught.value.message
    assert text_of(seen) == "partial answer " and not any(isinstance(e, Stop) for e in seen)
    assert len(server.requests) == 1  # a stream already under way is never re-sent


async def test_clean_close_before_the_end_is_an_incomplete_reply(server):
    body = openai_stream(["half"], [("c1", "read_file", fragments(ARGS_1, 4))], finish=None, done=False)
    server.plan(Plan(chunks=body, chunked=False))
    p = provider(server)
    with pytest.raises(ProviderError) as caught:
        await drain(p, conversation())
    await p.aclose()
    assert caught.value.code == ErrorCode.UPSTREAM_LLM and "ended before the reply was complete" in caught.value.message


async def test_error_inside_the_stream(server):
    body = openai_stream(["x"], finish=None, done=False) + [
        b'data: {"error": {"message": "upstream provider crashed", "type": "server_error"}}\n\n'
    ]
    server.plan(Plan(chunks=body))
    p = provider(server)
    with pytest.raises(ProviderError) as caught:
        await drain(p, conversation())
    await p.aclose()
    assert caught.value.code == ErrorCode.UPSTREAM_LLM and "upstream provider crashed" in caught.value.message


async def test_cancel_event_while_streaming_is_CANCELLED_and_hangs_up(server):
    server.plan(Plan(chunks=openai_stream(["first ", "second"], finish="stop"), stall_after=2))
    p = provider(server)
    cancel = asyncio.Event()
    seen = []
    with pytest.raises(ProviderError) as caught:
        async for event in p.stream(conversation(), cancel=cancel):
            seen.append(event)
            if isinstance(event, TextDelta):
                cancel.set()
    assert caught.value.code == ErrorCode.CANCELLED
    assert text_of(seen) == "first "
    assert await asyncio.to_thread(server.client_gone.wait, 5)  # the server saw the connection closed
    # the provider is still usable afterwards
    server.plan(Plan(chunks=openai_stream(["again"], finish="stop")))
    assert (await p.complete(conversation())).text == "again"
    await p.aclose()


async def test_task_cancel_while_streaming_propagates_and_hangs_up(server):
    server.plan(Plan(chunks=openai_stream(["first ", "second"], finish="stop"), stall_after=2))
    p = provider(server)
    got_first = asyncio.Event()

    async def consume():
        async for event in p.stream(conversation()):
            if isinstance(event, TextDelta):
                got_first.set()

    task = asyncio.create_task(consume())
    await got_first.wait()
    await asyncio.to_thread(server.stalled.wait, 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(server.client_gone.wait, 5)
    await p.aclose()


async def test_cancel_during_backoff(server):
    server.plan(json_error(503, {"error": {"message": "busy"}}, {"retry-after": "30"}))
    p = provider(server)
    cancel = asyncio.Event()
    with pytest.raises(ProviderError) as caught:
        async for event in p.stream(conversation(), cancel=cancel):
            if isinstance(event, Retrying):
                cancel.set()  # the host gives up while the provider waits 30 s
    await p.aclose()
    assert caught.value.code == ErrorCode.CANCELLED and "backing off" in caught.value.message


async def test_stalled_stream_times_out(server):
    server.plan(Plan(chunks=openai_stream(["slow"], finish="stop"), stall_after=2))
    p = provider(server, timeout=0.3)
    with pytest.raises(ProviderError) as caught:
        await drain(p, conversation())
    await p.aclose()
    assert caught.value.code == ErrorCode.TIMEOUT and "stalled" in caught.value.message


async def test_single_chunk_call_with_finish_stop_is_still_a_tool_use(server):
    chunk = {
        "model": "qwen",
        "choices": [
            {
                "index": 0,
                "delta": {"tool_calls": [{"id": "c9", "type": "function", "function": {"name": "read_file", "arguments": ARGS_1}}]},
                "finish_reason": "stop",
            }
        ],
    }
    server.plan(Plan(chunks=[f"data: {json.dumps(chunk)}\n\n".encode(), b"data: [DONE]\n\n"]))
    p = provider(server, model="qwen")
    reply = await p.complete(conversation(), [READ])
    await p.aclose()
    assert [(c.id, c.arguments) for c in reply.tool_calls] == [("c9", ARGS_1)]
    assert reply.stop_reason == "tool_use"


async def test_cost_cap_stops_the_next_call_before_sending(server):
    big = {"prompt_tokens": 1_000_000, "completion_tokens": 0, "total_tokens": 1_000_000}
    server.plan(Plan(chunks=openai_stream(["spent"], finish="stop", usage=big)))
    p = provider(server, meter=CostMeter(cap_usd=0.10))
    first = await p.complete(conversation())
    assert first.cost_usd == pytest.approx(0.15)
    with pytest.raises(ProviderError) as caught:
        await p.complete(conversation())
    await p.aclose()
    assert caught.value.code == ErrorCode.COST_CAP and "$0.1000" in caught.value.message
    assert len(server.requests) == 1


async def test_no_answer_at_all_is_retried_then_TIMEOUT(server):
    server.plan(Plan(chunks=openai_stream(["late"], finish="stop"), stall_headers=True), Plan(stall_headers=True))
    p = provider(server, timeout=0.2, retry=RetryPolicy(max_retries=1, base_delay=0.01, jitter=False))
    events = []
    with pytest.raises(ProviderError) as caught:
        async for event in p.stream(conversation()):
            events.append(event)
    await p.aclose()
    assert caught.value.code == ErrorCode.TIMEOUT and "did not answer within 0.2s" in caught.value.message
    assert [e.code for e in events if isinstance(e, Retrying)] == [ErrorCode.TIMEOUT]
    assert len(server.requests) == 2 and caught.value.__context__ is None
