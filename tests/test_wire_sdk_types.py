"""The request bodies our clients send, held to the official SDKs' typed parameters, and the
replies LiteLLM's proxy sent (tests/data/wire/) read by the SDKs' response types.

The SDKs (``openai``, ``anthropic``) are in the test extra only; the product never imports them.
A representative conversation carries every part the clients send: a system prompt, text, tool
definitions (the project's real tool catalogue), several calls in one turn, their results (one
an error), and a cap on tokens. A renamed or invented field fails here with its path.
"""

from __future__ import annotations

import json

import pytest
from sdk_shapes import problems
from wire_fixtures import events_of, recorded

from kernel_ext.providers.anthropic import AnthropicProvider
from kernel_ext.providers.messages import Conversation, Request, ToolUse
from kernel_ext.providers.openai_compat import OpenAICompatProvider
from kernel_ext.tools.registry import default_catalog

anthropic_params = pytest.importorskip("anthropic.types.message_create_params", reason="the anthropic SDK (test extra)")
openai_params = pytest.importorskip("openai.types.chat.completion_create_params", reason="the openai SDK (test extra)")

CLIENTS = {
    "openai": (OpenAICompatProvider(model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1"),
               openai_params.CompletionCreateParamsStreaming),
    "openai-official": (OpenAICompatProvider(model="gpt-4o-mini", base_url="https://api.openai.com/v1"),
                        openai_params.CompletionCreateParamsStreaming),  # max_completion_tokens there
    "anthropic": (AnthropicProvider(model="claude-sonnet-4-5", base_url="http://127.0.0.1:9"),
                  anthropic_params.MessageCreateParamsStreaming),
}


def conversations() -> dict[str, Request]:
    tools = tuple(default_catalog())
    plain = Conversation(system="")
    plain.user("Say hello.")
    full = Conversation(system="You are a careful engineer.")
    full.user("Add a docstring to main.py and a test.")
    full.assistant("Reading both first.", [ToolUse("call_1", "read_file", json.dumps({"path": "backend/main.py"})),
                                           ToolUse("call_2", "read_file", json.dumps({"path": "backend/test_main.py"}))])
    full.tool_result("call_1", "read_file", "1| app = FastAPI()")
    full.tool_result("call_2", "read_file", "not_found: backend/test_main.py", is_error=True)
    full.assistant("", [ToolUse("call_3", "write_file", json.dumps({"path": "backend/test_main.py", "content": "x = 1\n"}))])
    full.tool_result("call_3", "write_file", "created backend/test_main.py (1 lines)")
    full.assistant("Done.")
    full.user("Thanks; now the docstring.")
    return {"text only": Request.of(plain), "calls, results, tools": Request.of(full, tools, max_tokens=2048)}


@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("name", sorted(conversations()))
def test_our_request_bodies_are_the_sdks_typed_parameters_with_no_undeclared_key(client, name):
    provider, params = CLIENTS[client]
    body = provider._body(conversations()[name])
    assert problems(body, params) == []


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_drifted_field_name_is_caught_with_its_path(client):
    provider, params = CLIENTS[client]
    body = provider._body(conversations()["calls, results, tools"])
    for message in body["messages"]:  # a tool result's id under another name
        if message.get("role") == "tool":
            message["tool_id"] = message.pop("tool_call_id")
        for block in message["content"] if isinstance(message.get("content"), list) else ():
            if block.get("type") == "tool_result":
                block["tool_id"] = block.pop("tool_use_id")
    assert problems(body, params), "a renamed key went unnoticed"
    extra = provider._body(conversations()["text only"]) | {"stream_usage": True}
    assert problems(extra, params) == ["$.stream_usage: not a key of " + params.__name__]


def test_the_proxys_chat_completion_chunks_are_openais_chunk_type():
    from openai.types.chat import ChatCompletionChunk

    _, body = recorded("litellm-1.108.7", "openai-tools")
    chunks = [ChatCompletionChunk.model_validate(data) for _, data in events_of(body) if data != "[DONE]"]
    calls = [c for chunk in chunks for choice in chunk.choices for c in choice.delta.tool_calls or ()]
    assert {c.index for c in calls} == {0, 1} and chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens == 1200


def test_the_proxys_messages_events_are_anthropics_stream_event_types():
    from anthropic.types import RawMessageStreamEvent
    from pydantic import TypeAdapter

    _, body = recorded("litellm-1.108.7", "anthropic-tools")
    adapter = TypeAdapter(RawMessageStreamEvent)
    parsed = [adapter.validate_python(data) for _, data in events_of(body)]
    assert [e.type for e in parsed].count("content_block_start") == 3
    assert parsed[-2].type == "message_delta" and parsed[-2].usage.output_tokens == 80
