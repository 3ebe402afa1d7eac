"""Records what LiteLLM's proxy (1.108.7) really sends our two clients, into tests/data/wire/.

Run by hand (``.venv/bin/python tests/wire_capture.py``) when the pinned proxy changes; the unit
tests in tests/test_wire_fixtures.py read the files back, so the client is tested against the
proxy's own bytes without starting it. Each case sends the request body our client builds for a
small conversation (``wire_request``) to the proxy, in front of the project's loopback upstream
speaking OpenAI's protocol with a planned reply, and keeps the proxy's status, headers and body
as received: ``<format>-<case>.sse`` (the body) and ``<format>-<case>.json`` (status, headers,
the server and version that produced them).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import httpx
from litellm_proxy import ANTHROPIC_MODEL, OPENAI_MODEL, VERSION, litellm_proxy
from provider_server import Plan, ProviderServer, fragments, json_error, openai_stream

from kernel_ext.providers.anthropic import AnthropicProvider
from kernel_ext.providers.live import LiveProvider
from kernel_ext.providers.messages import Conversation, Request, ToolUse
from kernel_ext.providers.openai_compat import OpenAICompatProvider

OUT = Path(__file__).resolve().parent / "data" / "wire" / f"litellm-{VERSION}"
USAGE = {"prompt_tokens": 1200, "completion_tokens": 80, "total_tokens": 1280}
ARGS = [json.dumps({"path": "backend/a.py", "content": "x = 1\n"}), json.dumps({"path": "backend/b.py", "content": "y = 2\n"})]
WRITE = {"name": "write_file", "description": "Write a new text file.",
         "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                        "required": ["path", "content"]}}
CONTEXT = {"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted "
                                "in 130000 tokens. Please reduce the length of the messages.",
                     "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
RATE = {"error": {"message": "Rate limit reached for gpt-4o-mini", "type": "requests", "code": "rate_limit_exceeded"}}


def wire_request() -> Request:
    """A conversation with every part the clients send: system, text, a call, its result, tools."""
    conversation = Conversation(system="You are a careful engineer.")
    conversation.user("Add two modules.")
    conversation.assistant("Reading first.", [ToolUse("call_0", "read_file", json.dumps({"path": "backend/main.py"}))])
    conversation.tool_result("call_0", "read_file", "1| app = FastAPI()")
    return Request(conversation.system, tuple(conversation.messages), (WRITE,), 1000)


def planned_reply() -> Plan:
    calls = [("call_1", "write_file", fragments(ARGS[0], 5)), ("call_2", "write_file", fragments(ARGS[1], 5))]
    return Plan(chunks=openai_stream(["I will ", "write two files."], calls, usage=USAGE))


def cases() -> dict[str, Plan]:
    cut = planned_reply()
    cut.disconnect_after = 6  # inside the first call's arguments
    return {"tools": planned_reply(), "429": json_error(429, RATE, {"retry-after": "1"}),
            "context": json_error(400, CONTEXT), "cut": cut}


def record(name: str, provider: LiveProvider, url: str, upstream: ProviderServer, plan: Plan) -> None:
    upstream.plan(plan)
    body = json.dumps(provider._body(wire_request())).encode()
    with httpx.stream("POST", url + provider._path(), content=body, headers=provider._headers(provider.secrets()[0]),
                      timeout=120) as response:
        raw = b"".join(response.iter_raw())
    (OUT / f"{name}.sse").write_bytes(raw)
    meta = {"server": "LiteLLM proxy", "version": VERSION, "status": response.status_code,
            "headers": dict(response.headers), "upstream": "tests/provider_server.py (OpenAI Chat Completions)"}
    (OUT / f"{name}.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(name, response.status_code, len(raw), "bytes")


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    upstream = ProviderServer().start()
    try:
        with tempfile.TemporaryDirectory() as work, litellm_proxy(Path(work), upstream.url) as proxy:
            clients = {"openai": OpenAICompatProvider(model=OPENAI_MODEL, base_url=proxy.url + "/v1", api_key=proxy.key),
                       "anthropic": AnthropicProvider(model=ANTHROPIC_MODEL, base_url=proxy.url, api_key=proxy.key)}
            for fmt, client in clients.items():
                for case, plan in cases().items():
                    record(f"{fmt}-{case}", client, proxy.url, upstream, plan)
    finally:
        upstream.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
