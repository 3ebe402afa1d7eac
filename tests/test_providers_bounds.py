# ruff: noqa: F811 - fixtures imported from provider_server are requested by name
"""Bounded replies (providers/bounds.py, sse.py): limits, progress-only timeouts, budgets per chunk.

Each limit is exercised against the real loopback server with a stream larger than the limit,
for both protocols where the wire differs; the SSE splitter is checked on its own.
"""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from misbehaving_endpoint import endless, keepalives, reply, tasks_call
from provider_server import Plan, json_error, loopback_only, openai_stream, server  # noqa: F401

from kernel_ext.errors import ErrorCode
from kernel_ext.providers import Conversation, ProviderError, ToolUse
from kernel_ext.providers.anthropic import AnthropicProvider
from kernel_ext.providers.bounds import CallBudget, ReplyLimits
from kernel_ext.providers.messages import (
    ECHO_ARGUMENT_CHARS,
    ECHO_TEXT_CHARS,
    summarise,
)
from kernel_ext.providers.openai_compat import OpenAICompatProvider
from kernel_ext.providers.retry import RetryPolicy
from kernel_ext.providers.sse import split_lines

KEY = "sk-test-bounds-Zq8wVn3Lr5Tk2Pj7Hd4"
FAST = RetryPolicy(base_delay=0.01, max_delay=0.02, jitter=False)
SMALL = ReplyLimits(max_bytes=200_000, max_chars=50_000, max_tool_calls=3, max_argument_chars=20_000, idle_timeout=5, call_timeout=30)


def provider(server, protocol="openai", limits=SMALL, **kwargs):
    kwargs.setdefault("retry", FAST)
    if protocol == "openai":
        return OpenAICompatProvider(model="gpt-4o-mini", base_url=server.url + "/v1", api_key=KEY, limits=limits, **kwargs)
    return AnthropicProvider(model="claude-sonnet-4-5", base_url=server.url, api_key=KEY, limits=limits, **kwargs)


def conversation() -> Conversation:
    conv = Conversation(system="s")
    conv.user("u")
    return conv


async def failure(p, **kwargs) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await p.complete(conversation(), **kwargs)
    await p.aclose()
    assert KEY not in caught.value.message and caught.value.__context__ is None
    return caught.value


# -- the SSE splitter ---------------------------------------------------------------------------


async def lines_of(*chunks: str) -> list[str]:
    async def source():
        for chunk in chunks:
            yield chunk

    return [line async for line in split_lines(source())]


async def test_lines_end_only_at_cr_lf_and_crlf_even_across_chunks():
    assert await lines_of("a\u2028b\u2029c\x85d\x0ce\n", "f\r", "\ng\rh\r\n\ni") == ["a\u2028b\u2029c\x85d\x0ce", "f", "g", "h", "", "i"]
    assert await lines_of("x\r", "\r", "y") == ["x", "", "y"]  # CR CR is two line ends, not one
    assert await lines_of("") == [] and await lines_of("no end") == ["no end"]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab\r\n\u2028", max_size=40), st.lists(st.integers(0, 40), max_size=6))
def test_any_chunking_gives_the_lines_of_the_whole_text(text, cuts):
    """However the text is cut into pieces, the lines are those of the whole (CR LF, LF, CR end one)."""
    import asyncio
    import re

    bounds = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    chunks = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    expected = re.split("\r\n|\r|\n", text)
    if expected and expected[-1] == "":
        expected.pop()  # a final terminator ends the last line; it does not start another
    assert asyncio.run(lines_of(*chunks)) == expected


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
async def test_raw_line_separators_inside_a_json_chunk_arrive_whole(server, protocol):
    text = "one\u2028two\u2029three\x85four"
    server.plan(Plan(chunks=list(reply(protocol, [text]))))
    result = await provider(server, protocol).complete(conversation())
    assert result.text == text


# -- size limits --------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
async def test_an_endless_text_stream_ends_at_the_character_limit(server, protocol):
    import threading

    stop = threading.Event()
    server.plan(Plan(chunks=reply(protocol, endless("z" * 1000, stop))))
    try:
        error = await failure(provider(server, protocol))
    finally:
        stop.set()
    assert error.code == ErrorCode.REPLY_TOO_LARGE and error.data["limit"] == "reply_chars"
    assert "BESSER_LLM_MAX_REPLY_CHARS" in error.message


async def test_heartbeats_count_against_the_byte_limit(server):
    server.plan(Plan(chunks=[b": ping " + b"p" * 50_000 + b"\n\n"] * 10))
    error = await failure(provider(server))
    assert error.code == ErrorCode.REPLY_TOO_LARGE and error.data["limit"] == "reply_bytes"


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
async def test_tool_calls_and_argument_size_are_capped(server, protocol):
    server.plan(Plan(chunks=list(reply(protocol, call=("write_file", ['{"content": "' + "x" * 30_000 + '"}'])))))
    error = await failure(provider(server, protocol))
    assert error.code == ErrorCode.REPLY_TOO_LARGE and error.data["limit"] == "argument_chars"
    calls = [(f"c{i}", "read_file", ['{"path": "a"}']) for i in range(4)]
    server.plan(Plan(chunks=openai_stream(calls=calls)))
    error = await failure(provider(server))
    assert error.code == ErrorCode.REPLY_TOO_LARGE and error.data["limit"] == "tool_calls"



@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
async def test_a_calls_arguments_are_counted_across_its_pieces(server, protocol):
    """Each piece is far below the limit; together they pass it."""
    pieces = ['{"content": "'] + ["x" * 1000] * 25 + ['"}']
    server.plan(Plan(chunks=list(reply(protocol, call=("write_file", pieces)))))
    error = await failure(provider(server, protocol))
    assert error.code == ErrorCode.REPLY_TOO_LARGE and error.data["limit"] == "argument_chars"


async def test_as_many_calls_as_the_limit_pass_and_a_numeric_id_is_bounded_by_its_digits(server):
    calls = [(f"c{i}", "read_file", ['{"path": "a"}']) for i in range(SMALL.max_tool_calls)]
    server.plan(Plan(chunks=openai_stream(calls=calls)))
    result = await provider(server).complete(conversation())
    assert [c.id for c in result.tool_calls] == ["c0", "c1", "c2"]
    server.plan(Plan(chunks=openai_stream(calls=[(int("7" * 257), "list_files", ["{}"])])))
    error = await failure(provider(server))
    assert error.code == ErrorCode.REPLY_TOO_LARGE and "a tool call id of more than 256 characters" in error.message

# -- time: progress only, the call's total, the run's deadline ---------------------------------


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
async def test_comments_and_empty_keepalives_are_not_progress(server, protocol):
    import threading

    stop = threading.Event()
    server.plan(Plan(chunks=keepalives(protocol, 0.1, stop)))
    limits = ReplyLimits(idle_timeout=0.8, call_timeout=30)
    try:
        error = await failure(provider(server, protocol, limits, timeout=0.8))
    finally:
        stop.set()
    assert error.code == ErrorCode.TIMEOUT and error.data["limit"] == "idle_timeout" and "no progress" in error.message


async def test_a_stream_that_progresses_slowly_ends_at_the_call_timeout(server):
    import threading

    stop = threading.Event()

    def trickle():
        for piece in reply("openai", endless("a", stop)):
            yield piece
            if stop.wait(0.05):
                return

    server.plan(Plan(chunks=trickle()))
    try:
        error = await failure(provider(server, limits=ReplyLimits(idle_timeout=5, call_timeout=0.6)))
    finally:
        stop.set()
    assert error.code == ErrorCode.TIMEOUT and error.data["limit"] == "call_timeout"


async def test_the_runs_deadline_stops_a_stream_mid_reply(server):
    server.plan(Plan(chunks=openai_stream(["started"], finish=None, done=False), stall_after=2))
    error = await failure(provider(server, limits=ReplyLimits()), budget=CallBudget(deadline=time.monotonic() + 0.5))
    server.release.set()
    assert error.code == ErrorCode.BUDGET and "wall-time" in error.message


async def test_retry_after_past_the_deadline_is_refused_without_waiting(server):
    server.plan(*[json_error(429, {"error": {"message": "slow down"}}, {"retry-after": "59"}) for _ in range(3)])
    p = provider(server, limits=ReplyLimits(), retry=RetryPolicy())
    error = await failure(p, budget=CallBudget(deadline=time.monotonic() + 20))
    # one request: the wait was refused up front, not slept through
    assert error.code == ErrorCode.BUDGET and "would wait 59s" in error.message and len(server.requests) == 1



async def test_a_retry_whose_wait_fits_the_call_and_the_run_is_made(server):
    refusal = json_error(429, {"error": {"message": "slow down"}}, {"retry-after": "0"})
    server.plan(refusal, Plan(chunks=openai_stream(["fine"], finish="stop")))
    p = provider(server, limits=ReplyLimits(call_timeout=30))
    result = await p.complete(conversation(), budget=CallBudget(deadline=time.monotonic() + 60))
    await p.aclose()
    assert result.text == "fine" and len(server.requests) == 2

async def test_retry_after_past_the_call_timeout_is_a_named_timeout(server):
    server.plan(*[json_error(503, {"error": {"message": "busy"}}, {"retry-after": "30"}) for _ in range(2)])
    error = await failure(provider(server, limits=ReplyLimits(call_timeout=10), retry=RetryPolicy()))
    assert error.code == ErrorCode.TIMEOUT and "BESSER_LLM_CALL_TIMEOUT_SECONDS" in error.message


async def test_token_and_cost_budgets_cut_a_reply_mid_stream(server):
    big = ["w" * 4000] * 20  # about 20,000 output tokens
    server.plan(Plan(chunks=openai_stream(big, finish="stop")))
    error = await failure(provider(server, limits=ReplyLimits()), budget=CallBudget(tokens_left=5_000))
    assert error.code == ErrorCode.BUDGET and error.data["budget"] == "tokens"
    server.plan(Plan(chunks=list(reply("anthropic", big))))
    error = await failure(provider(server, "anthropic", limits=ReplyLimits()), budget=CallBudget(cost_left_usd=0.01))
    assert error.code == ErrorCode.COST_CAP and error.data["budget"] == "cost"


# -- what stayed good stays good ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("plan", "words"),
    [
        (Plan(chunks=[b'data: {"choices": [{"index": 0, "delta": {"content": "\xff\xfe"}}]}\n\n']), "not UTF-8"),
        (Plan(chunks=[b'data: {"choices": [{"index": 0, "delta": {"content": "a\x00b"}}]}\n\n']), "unreadable"),
        (Plan(chunks=[b"<html><body>gateway</body></html>"], headers={"content-type": "text/html"}), "ended before"),
        (Plan(chunks=[b"data: {}\n\n"], headers={"content-encoding": "gzip"}), "encoded stream"),
        (json_error(429, {"error": {"message": "later"}}, {"retry-after": "100000"}), "more than the 60s allowed"),
    ],
    ids=["invalid-utf8", "nul", "html", "gzip", "retry-after-100000"],
)
async def test_broken_streams_are_named_upstream_errors(server, plan, words):
    server.plan(plan)
    error = await failure(provider(server, limits=ReplyLimits()))
    assert error.code == ErrorCode.UPSTREAM_LLM and words in error.message


def test_limits_come_from_the_environment_and_bad_values_are_named():
    limits = ReplyLimits.from_env({"BESSER_LLM_MAX_REPLY_BYTES": "1000", "BESSER_LLM_CALL_TIMEOUT_SECONDS": "2.5"})
    assert limits.max_bytes == 1000 and limits.call_timeout == 2.5 and limits.max_chars == ReplyLimits().max_chars
    assert ReplyLimits.from_env({"BESSER_LLM_TIMEOUT_SECONDS": "9"}, idle_timeout=3).idle_timeout == 3
    for bad in ("0", "-1", "nan", "inf", "lots"):
        with pytest.raises(ProviderError) as caught:
            ReplyLimits.from_env({"BESSER_LLM_MAX_TOOL_CALLS": bad})
        assert caught.value.code == ErrorCode.NOT_CONFIGURED and "BESSER_LLM_MAX_TOOL_CALLS" in caught.value.message


# -- what is sent back stays bounded ------------------------------------------------------------


def test_the_conversation_keeps_a_huge_reply_and_call_bounded():
    conv = Conversation()
    huge = ToolUse("c1", "write_file", json.dumps({"path": "a.py", "content": "x" * 5_000_000}))
    message = conv.assistant("t" * 3_000_000, [huge, ToolUse("c2", "read_file", '{"path": "a.py"}')])
    assert len(message.text) <= ECHO_TEXT_CHARS and "chars omitted" in message.text
    kept = message.tool_calls[0]
    assert len(kept.arguments) <= ECHO_ARGUMENT_CHARS and kept.parsed() is not None and kept.id == "c1"
    assert message.tool_calls[1].arguments == '{"path": "a.py"}'
    result = conv.tool_result("c1", "read_file", "r" * 1_000_000)
    assert len(result.content) < 70_000 and result.content.endswith("chars omitted]")
    assert summarise("short", 10) == "short"


def test_planned_and_model_tasks_are_short_and_few():
    from kernel_ext.errors import ToolFailure
    from kernel_ext.pipeline.planner import _tasks
    from kernel_ext.tools.task_list import MAX_MODEL_TASKS, MAX_TASK_CHARS, TaskList

    planned = _tasks(["t" * 5_000_000, "  two\nlines  "] * 20)
    assert len(planned) == 16 and all(len(t) <= MAX_TASK_CHARS for t in planned) and planned[1] == "two lines"
    tasks = TaskList()
    for _ in range(MAX_MODEL_TASKS):
        tasks.add("x" * 10_000)
    with pytest.raises(ToolFailure):
        tasks.add("one more")
    tasks.add("the host's own", origin="request")
    assert len(tasks.render()) < (MAX_MODEL_TASKS + 1) * (MAX_TASK_CHARS + 40)


async def test_a_planning_reply_with_a_huge_task_plans_a_short_one(server):
    from kernel_ext.pipeline.planner import plan_gap

    server.plan(Plan(chunks=list(reply("openai", call=tasks_call("Add isbn " + "y" * 40_000)))))
    planned = await plan_gap(provider(server, limits=ReplyLimits()), "r", "s", "m")
    assert len(planned) == 1 and planned[0].startswith("Add isbn y") and len(planned[0]) <= 500


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
@pytest.mark.parametrize(("what", "size", "cut"), [("name", 128, False), ("name", 129, True), ("id", 256, False), ("id", 257, True)])
async def test_a_tool_name_and_a_call_id_are_bounded_while_streaming(server, protocol, what, size, cut):
    name, call_id = ("n" * size, None) if what == "name" else ("list_files", "i" * size)
    server.plan(Plan(chunks=list(reply(protocol, call=(name, ["{}"]), call_id=call_id))))
    if not cut:
        result = await provider(server, protocol).complete(conversation())
        assert [(c.name, c.id) for c in result.tool_calls] == [(name, call_id or ("call_big" if protocol == "openai" else "toolu_big"))]
        return
    error = await failure(provider(server, protocol))
    assert error.code == ErrorCode.REPLY_TOO_LARGE
    assert f"a tool {'name' if what == 'name' else 'call id'} of more than {size - 1} characters" in error.message
