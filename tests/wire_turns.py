"""The upstream's side of a whole run through a proxy: Phase 2 turns as OpenAI streams.

The upstream is the project's loopback server (tests/provider_server.py), scripted; what the
client reads is what the proxy in front of it makes of these turns. The turns drive real tool
calls, so Phase 2 passes the boundary for real: tasks submitted, two files written in one turn,
a task closed with evidence from them, then a closing text.
"""

from __future__ import annotations

import json
from typing import Any

from provider_server import Plan, Seen, fragments, json_error, openai_stream

REQUEST = "A FastAPI backend with a greeting module and a farewell module"
FILES = {"backend/greeting.py": 'GREETING = "hello from the wire"\n', "backend/farewell.py": 'FAREWELL = "goodbye from the wire"\n'}
USAGE = {"prompt_tokens": 1500, "completion_tokens": 120, "total_tokens": 1620}
RATE = {"error": {"message": "Rate limit reached for gpt-4o-mini", "type": "requests", "code": "rate_limit_exceeded"}}
CONTEXT = {"error": {"message": "This model's maximum context length is 8192 tokens. However, your messages resulted "
                                "in 9000 tokens. Please reduce the length of the messages.",
                     "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}


def _turn(text: list[str], calls: list[tuple[str, dict[str, Any]]], finish: str = "tool_calls") -> Plan:
    wired = [(f"call_{name}_{i}", name, fragments(json.dumps(args), 7)) for i, (name, args) in enumerate(calls)]
    return Plan(chunks=openai_stream(text, wired, finish=finish, usage=USAGE))


def submit() -> Plan:
    return _turn([], [("submit_tasks", {"tasks": ["add a greeting module and a farewell module"]})])


def write_both() -> Plan:
    """Text, then two calls in one turn."""
    return _turn(["I will write ", "both modules."], [("write_file", {"path": p, "content": c}) for p, c in FILES.items()])


def whole_run() -> list[Plan]:
    """A 429 with Retry-After first, then the run's turns to a closing text."""
    evidence = [{"id": "T1", "path": p, "quote": c.strip()} for p, c in FILES.items()]
    return [
        json_error(429, RATE, {"retry-after": "1"}),
        submit(),
        write_both(),
        _turn([], [("task_list", {"action": "done", "id": "T1", "evidence": evidence})]),
        _turn(["Both modules ", "are written."], [], finish="stop"),
    ]


def context_overflow_run() -> list[Plan]:
    return [submit(), json_error(400, CONTEXT)]


def cut_run() -> list[Plan]:
    """The stream drops inside the first of the two calls."""
    cut = write_both()
    cut.disconnect_after = 5
    return [submit(), cut]


def tool_results(seen: list[Seen]) -> list[str]:
    """The tool results the upstream was sent, in Chat Completions form, in order."""
    last = next((s.body for s in reversed(seen) if isinstance(s.body, dict) and s.body.get("messages")), {})
    return [str(m.get("content")) for m in last.get("messages", ()) if m.get("role") == "tool"]
