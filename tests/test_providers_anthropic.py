"""Anthropic provider against a real loopback server speaking Messages SSE."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from provider_server import Plan, anthropic_stream, fragments, json_error, loopback_only, rechunk, server  # noqa: F401

from kernel_ext.errors import ErrorCode
from kernel_ext.providers import Conversation, ProviderError, ToolUse
from kernel_ext.providers.anthropic import API_VERSION, AnthropicProvider
from kernel_ext.providers.events import Retrying, Stop, TextDelta, ToolCallDone, UsageUpdate
from kernel_ext.providers.retry import RetryPolicy
from kernel_ext.tools.base import Category, ToolArgs, ToolOutcome, ToolSpec

KEY = "sk-ant-api03-Yh5Rk2Wq9Lm4Tz7Vb1Nc8Xd3Pf6"
FAST = RetryPolicy(base_delay=0.01, max_delay=0.02, jitter=False)
ARGS_1 = json.dumps({"query": "class Book", "limit": 5})
ARGS_2 = json.dumps({"path": "app/api.py", "content": "def list_books():\n    return [\"ü\"]\n"}, ensure_ascii=False)


class SearchArgs(ToolArgs):
    query: str
    limit: int = 10


SEARCH = ToolSpec("search_code", Category.READ, SearchArgs, "Search the project.", run=lambda a, c: ToolOutcome("x"))


def provider(server, key=KEY, **kwargs):
    kwargs.setdefault("retry", FAST)
    return AnthropicProvider(model="claude-sonnet-4-5", base_url=server.url, api_key=key, **kwargs)


def conversation() -> Conversation:
    conv = Conversation(system="You customise generated FastAPI apps.")
    conv.user("List the books endpoint")
    return conv


async def drain(p, conv, tools=(), **kwargs):
    return [e async for e in p.stream(conv, tools, **kwargs)]


def text_of(events):
    return "".join(e.text for e in events if isinstance(e, TextDelta))


USAGE_IN = {"input_tokens": 900, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 100, "output_tokens": 1}


async def test_text_and_two_tool_calls_reassembled_exactly(server):
    calls = [("toolu_01", "search_code", fragments(ARGS_1, 2)), ("toolu_02", "write_file", fragments(ARGS_2, 3))]
    body = anthropic_stream(["Let me ", "look."], calls, usage_in=USAGE_IN, output_tokens=120)
    server.plan(Plan(chunks=rechunk(body, 5)))
    p = provider(server)
    events = await drain(p, conversation(), [SEARCH])
    await p.aclose()

    assert text_of(events) == "Let me look."
    done = [e.call for e in events if isinstance(e, ToolCallDone)]
    assert [(c.id, c.name, c.arguments) for c in done] == [("toolu_01", "search_code", ARGS_1), ("toolu_02", "write_file", ARGS_2)]
    assert [e.kind for e in events][-2:] == ["usage", "stop"]
    assert events[-1] == Stop("tool_use", "tool_use")


async def test_usage_and_cost(server):
    server.plan(Plan(chunks=anthropic_stream(["ok"], stop_reason="end_turn", usage_in=USAGE_IN, output_tokens=120)))
    p = provider(server)
    events = await drain(p, conversation())
    await p.aclose()
    update = next(e for e in events if isinstance(e, UsageUpdate))
    u = update.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens) == (900, 120, 1000, 100)
    # claude-sonnet-4* per million: 3 in, 15 out, 0.30 cache read, 3.75 cache write
    expected = (900 * 3 + 120 * 15 + 1000 * 0.30 + 100 * 3.75) / 1_000_000
    # priced at the configured model; the endpoint's own name (a dated snapshot of it) is kept, shown, not noted
    assert (update.model, update.reported_model) == (p.model, "claude-sonnet-4-5-20250929") and not p.meter.take_notices()
    assert update.cost_usd == pytest.approx(expected) and update.total_cost_usd == pytest.approx(expected)
    assert events[-1] == Stop("end", "end_turn")


async def test_request_is_a_messages_call(server):
    server.plan(Plan(chunks=anthropic_stream(["ok"], stop_reason="end_turn")))
    conv = conversation()
    conv.assistant("Searching.", [ToolUse("toolu_01", "search_code", ARGS_1), ToolUse("toolu_02", "search_code", "not json")])
    conv.tool_result("toolu_01", "search_code", "app/api.py:3")
    conv.tool_result("toolu_02", "search_code", "error [invalid_json]: ...", is_error=True)
    conv.user("Now add pagination")
    p = provider(server)
    await drain(p, conv, [SEARCH], max_tokens=777)
    await p.aclose()

    seen = server.requests[0]
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == KEY and seen.headers["anthropic-version"] == API_VERSION
    assert "authorization" not in seen.headers
    body = seen.body
    assert body["model"] == "claude-sonnet-4-5" and body["stream"] is True and body["max_tokens"] == 777
    assert body["system"] == "You customise generated FastAPI apps."
    assert body["tools"] == [{"name": "search_code", "description": "Search the project.", "input_schema": SEARCH.json_schema()}]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assistant = body["messages"][1]["content"]
    assert assistant[0] == {"type": "text", "text": "Searching."}
    assert assistant[1] == {"type": "tool_use", "id": "toolu_01", "name": "search_code", "input": json.loads(ARGS_1)}
    assert assistant[2]["input"] == {"_unparsed_arguments": "not json"}
    results = body["messages"][2]["content"]  # both results and the next words share one user turn
    assert results[0] == {"type": "tool_result", "tool_use_id": "toolu_01", "content": "app/api.py:3"}
    assert results[1]["is_error"] is True
    assert results[2] == {"type": "text", "text": "Now add pagination"}


async def test_base_url_with_v1_is_accepted(server):
    server.plan(Plan(chunks=anthropic_stream(["ok"], stop_reason="end_turn")))
    p = AnthropicProvider(model="claude-haiku-4-5", base_url=server.url + "/v1/", api_key=KEY, retry=FAST)
    await drain(p, conversation())
    await p.aclose()
    assert server.requests[0].path == "/v1/messages"


async def test_overloaded_529_then_success_is_retried(server):
    server.plan(
        json_error(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        json_error(429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}, {"retry-after": "0"}),
        Plan(chunks=anthropic_stream(["done"], stop_reason="end_turn")),
    )
    p = provider(server)
    events = await drain(p, conversation())
    await p.aclose()
    retries = [e for e in events if isinstance(e, Retrying)]
    assert [r.attempt for r in retries] == [1, 2] and "overloaded_error" in retries[0].reason
    assert p.retries == 2 and len(server.requests) == 3 and text_of(events) == "done"


async def test_invalid_key_maps_to_INVALID_KEY_and_the_key_is_nowhere(server, caplog):
    caplog.set_level(logging.DEBUG)
    server.require_key("anthropic", "sk-ant-the-right-one-0000000")
    p = provider(server)
    with pytest.raises(ProviderError) as caught:
        await drain(p, conversation())
    await p.aclose()
    error = caught.value
    assert error.code == ErrorCode.INVALID_KEY and "authentication_error" in error.message
    assert server.requests[0].headers["x-api-key"] == KEY
    for text in (str(error), repr(error), error.message, *map(str, error.args), json.dumps(error.data), caplog.text, repr(p)):
        assert KEY not in text and KEY[10:22] not in text
    assert error.__cause__ is None and error.__context__ is None


async def test_error_event_mid_stream(server):
    body = anthropic_stream(["partial"], stop_reason=None, stop=False)
    body.append(b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}\n\n')
    server.plan(Plan(chunks=body))
    p = provider(server)
    with pytest.raises(ProviderError) as caught:
        await drain(p, conversation())
    await p.aclose()
    assert caught.value.code == ErrorCode.UPSTREAM_LLM and "overloaded_error" in caught.value.message
    assert len(server.requests) == 1


async def test_disconnect_inside_a_tool_call(server):
    body = anthropic_stream(["x"], [("toolu_9", "search_code", fragments(ARGS_1, 2))], usage_in=USAGE_IN)
    server.plan(Plan(chunks=body, disconnect_after=9))
    p = provider(server)
    seen = []
    with pytest.raises(ProviderError) as caught:
        async for event in p.stream(conversation()):
            seen.append(event)
    await p.aclose()
    assert caught.value.code == ErrorCode.UPSTREAM_LLM and "dropped mid-stream" in caught.value.message
    assert not any(isinstance(e, ToolCallDone) for e in seen)  # half a call is never handed out


async def test_clean_eof_inside_a_tool_call(server):
    body = anthropic_stream([], [("toolu_9", "search_code", fragments(ARGS_1, 2))], stop_reason=None, stop=False)
    server.plan(Plan(chunks=body[:-2], chunked=False))  # the block never stops
    p = provider(server)
    with pytest.raises(ProviderError) as caught:
        await drain(p, conversation())
    await p.aclose()
    assert caught.value.code == ErrorCode.UPSTREAM_LLM and "ended before the reply was complete" in caught.value.message


async def test_cancel_event_while_streaming(server):
    server.plan(Plan(chunks=anthropic_stream(["one ", "two"], stop_reason="end_turn"), stall_after=4))
    p = provider(server)
    cancel = asyncio.Event()
    seen = []
    with pytest.raises(ProviderError) as caught:
        async for event in p.stream(conversation(), cancel=cancel):
            seen.append(event)
            cancel.set()
    assert caught.value.code == ErrorCode.CANCELLED and text_of(seen) == "one "
    assert await asyncio.to_thread(server.client_gone.wait, 5)
    await p.aclose()


async def test_malformed_event_is_named(server):
    body = anthropic_stream(["x"], stop_reason="end_turn")
    body.insert(2, b'event: content_block_start\ndata: {"type": "content_block_start", "index": "first", "content_block": {}}\n\n')
    server.plan(Plan(chunks=body))
    p = provider(server)
    with pytest.raises(ProviderError) as caught:
        await drain(p, conversation())
    await p.aclose()
    assert caught.value.code == ErrorCode.UPSTREAM_LLM and "malformed stream event (ValueError)" in caught.value.message
    assert caught.value.__context__ is None
