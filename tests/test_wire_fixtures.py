"""Our clients read LiteLLM's proxy (1.108.7) as it really answers: its recorded bytes
(tests/data/wire/litellm-1.108.7/, made by tests/wire_capture.py from the real proxy) served
again by the loopback server. What the proxy does differently from the vendors' own servers is
pinned here: its usage chunk keeps an empty choice, its Anthropic-format stream reports input
tokens only at the end, a 429's ``Retry-After`` reaches the client only as
``llm_provider-retry-after`` (Chat Completions) or not at all (``/v1/messages``), a context
overflow is a 400 naming ``ContextWindowExceededError``, and an upstream cut becomes an error
event inside a 200 stream.
"""

from __future__ import annotations

import json

import pytest
from provider_server import loopback_only, server  # noqa: F401
from wire_capture import ARGS
from wire_fixtures import recorded, replayed

from kernel_ext.errors import ErrorCode
from kernel_ext.providers import Conversation, ProviderError
from kernel_ext.providers.anthropic import AnthropicProvider
from kernel_ext.providers.events import Retrying, Stop, TextDelta, ToolCallDone, UsageUpdate
from kernel_ext.providers.openai_compat import OpenAICompatProvider
from kernel_ext.providers.retry import RetryPolicy, retry_after_seconds

LITELLM = "litellm-1.108.7"
KEY = "sk-wire-Zq8wVn3Lr5Tk2Pj7Hd4Mb6"
FAST = RetryPolicy(base_delay=0.01, max_delay=0.02, jitter=False)
CLIENTS = {
    "openai": lambda url: OpenAICompatProvider(model="gpt-4o-mini", base_url=url + "/v1", api_key=KEY, retry=FAST),
    "anthropic": lambda url: AnthropicProvider(model="claude-sonnet-4-5", base_url=url, api_key=KEY, retry=FAST),
}


def conversation() -> Conversation:
    conv = Conversation(system="You are a careful engineer.")
    conv.user("Add two modules.")
    return conv


async def drain(server, fmt):  # noqa: F811
    client = CLIENTS[fmt](server.url)
    events = []
    try:
        async for event in client.stream(conversation()):
            events.append(event)
    finally:
        await client.aclose()
    return events


@pytest.mark.parametrize("fmt", sorted(CLIENTS))
async def test_text_two_calls_usage_and_stop_read_from_the_proxys_stream(server, fmt):  # noqa: F811
    server.plan(replayed(LITELLM, f"{fmt}-tools"))
    events = await drain(server, fmt)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "I will write two files."
    calls = [e.call for e in events if isinstance(e, ToolCallDone)]
    assert [(c.id, c.name, c.arguments) for c in calls] == [("call_1", "write_file", ARGS[0]), ("call_2", "write_file", ARGS[1])]
    (usage,) = [e for e in events if isinstance(e, UsageUpdate)]
    assert (usage.usage.input_tokens, usage.usage.output_tokens) == (1200, 80) and not usage.problems
    assert isinstance(events[-1], Stop) and events[-1].reason == "tool_use"


def test_the_proxy_relays_retry_after_under_its_own_prefix_only():
    meta, _ = recorded(LITELLM, "openai-429")
    assert "retry-after" not in meta["headers"] and meta["headers"]["llm_provider-retry-after"] == "1"
    assert retry_after_seconds(meta["headers"]) == 1.0
    # the endpoint's own header wins over a relayed one
    assert retry_after_seconds({"retry-after": "3", "llm_provider-retry-after": "1"}) == 3.0
    assert retry_after_seconds({"llm_provider-server": "x"}) is None


@pytest.mark.parametrize("fmt", sorted(CLIENTS))
async def test_a_429_is_retried_once_then_the_reply_is_read(server, fmt):  # noqa: F811
    server.plan(replayed(LITELLM, f"{fmt}-429"), replayed(LITELLM, f"{fmt}-tools"))
    events = await drain(server, fmt)
    (notice,) = [e for e in events if isinstance(e, Retrying)]
    # Chat Completions: the upstream's Retry-After, relayed; /v1/messages drops it: our own backoff
    assert notice.delay == (1.0 if fmt == "openai" else FAST.base_delay)
    assert notice.code == ErrorCode.UPSTREAM_LLM and "HTTP 429" in notice.reason
    assert len([e for e in events if isinstance(e, ToolCallDone)]) == 2 and len(server.requests) == 2


@pytest.mark.parametrize("fmt", sorted(CLIENTS))
async def test_a_context_overflow_is_final_and_named(server, fmt):  # noqa: F811
    server.plan(replayed(LITELLM, f"{fmt}-context"), replayed(LITELLM, f"{fmt}-tools"))
    with pytest.raises(ProviderError) as caught:
        await drain(server, fmt)
    assert caught.value.code == ErrorCode.CONTEXT_TOO_LONG and caught.value.data["status"] == 400
    assert "longer than the model's context window; no retry" in caught.value.message
    assert "ContextWindowExceededError" in caught.value.message and KEY not in caught.value.message
    assert len(server.requests) == 1


@pytest.mark.parametrize("fmt", sorted(CLIENTS))
async def test_an_upstream_cut_mid_call_ends_the_reply_with_no_call(server, fmt):  # noqa: F811
    server.plan(replayed(LITELLM, f"{fmt}-cut"))
    seen = []
    with pytest.raises(ProviderError) as caught:
        seen = await drain(server, fmt)
    assert caught.value.code == ErrorCode.UPSTREAM_LLM
    assert "reported an error mid-stream" in caught.value.message and "Connection error" in caught.value.message
    assert not any(isinstance(e, ToolCallDone) for e in seen) and len(server.requests) == 1


def test_every_recording_names_the_server_and_version_that_produced_it():
    for fmt in CLIENTS:
        for case in ("tools", "429", "context", "cut"):
            meta, body = recorded(LITELLM, f"{fmt}-{case}")
            assert (meta["server"], meta["version"]) == ("LiteLLM proxy", "1.108.7") and body
            if meta["status"] == 200:
                assert meta["headers"]["x-litellm-version"] == "1.108.7"
            else:
                json.loads(body)  # an error body is JSON
