"""Misbehaving LLM endpoints: streams that never end, drip, stall, throttle or are huge.

Every case is served by the real loopback ``ProviderServer`` (tests/provider_server.py),
speaking OpenAI chat-completions or Anthropic messages streaming. Bodies are generators, so
a "200 MB" reply is produced lazily and only as far as the client reads it: the size is a
property of the stream, and the limit under test (set low by environment) is far below it.
Drips and stalls sleep in the server's own thread and end when the client hangs up or the
server stops.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from provider_server import Plan, json_error

PROTOCOLS = ("openai", "anthropic")
KEY = "sk-misbehaving-0123456789abcdefghijklmnop"  # a fake key; must never reach a file of a run
REQUEST = "Pydantic classes for the library, with an isbn on Book"  # what the harness's runs ask for


def endpoint_env(server, protocol: str) -> dict[str, str]:
    """The environment that points a run at ``server`` speaking ``protocol``, with the test key."""
    if protocol == "openai":
        return {"OPENAI_BASE_URL": server.url + "/v1", "OPENAI_API_KEY": KEY}
    return {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": KEY}

MB = 1024 * 1024


def event(data: Any, name: str | None = None) -> bytes:
    """One SSE event, non-ASCII sent raw (as servers that do not escape it do)."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return (f"event: {name}\n" if name else "").encode() + f"data: {text}\n\n".encode()


def reply(
    protocol: str,
    text: Iterable[str] = (),
    call: tuple[str, Iterable[str]] | None = None,
    finish: bool = True,
    *,
    model: str | None = None,
    call_id: str | None = None,
    usage: tuple[int, int] | None = None,
) -> Iterator[bytes]:
    """A streamed reply, lazily: text pieces, then one tool call (name, argument pieces).

    ``model``: the name the endpoint reports (default: the configured one); ``call_id``: the
    call's wire id; ``usage``: (input, output) tokens reported at the end."""
    if protocol == "openai":
        base = {"id": "c1", "object": "chat.completion.chunk", "model": model or "gpt-4o-mini"}

        def chunk(delta: dict, finish_reason: str | None = None) -> bytes:
            return event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})

        yield chunk({"role": "assistant", "content": ""})
        for piece in text:
            yield chunk({"content": piece})
        if call is not None:
            yield chunk({"tool_calls": [{"index": 0, "id": call_id or "call_big", "type": "function",
                                         "function": {"name": call[0], "arguments": ""}}]})
            for piece in call[1]:
                yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        if finish:
            yield chunk({}, "tool_calls" if call is not None else "stop")
            if usage is not None:
                yield event({**base, "choices": [], "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}})
            yield event("[DONE]")
        return
    counts = {"input_tokens": usage[0] if usage else 10, "output_tokens": 1}
    yield event({"type": "message_start", "message": {"id": "m1", "type": "message", "role": "assistant",
                                                      "model": model or "claude-sonnet-4-5", "content": [], "usage": counts}}, "message_start")
    index = 0
    for position, piece in enumerate(text):
        if position == 0:
            yield event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}, "content_block_start")
        yield event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}, "content_block_delta")
        index = 1
    if index:
        yield event({"type": "content_block_stop", "index": 0}, "content_block_stop")
    if call is not None:
        block = {"type": "tool_use", "id": call_id or "toolu_big", "name": call[0], "input": {}}
        yield event({"type": "content_block_start", "index": index, "content_block": block}, "content_block_start")
        for piece in call[1]:
            delta = {"type": "input_json_delta", "partial_json": piece}
            yield event({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")
        yield event({"type": "content_block_stop", "index": index}, "content_block_stop")
    if finish:
        stop = "tool_use" if call is not None else "end_turn"
        yield event({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": usage[1] if usage else 5}},
                    "message_delta")
        yield event({"type": "message_stop"}, "message_stop")


def tasks_call(*tasks: str) -> tuple[str, list[str]]:
    return "submit_tasks", [json.dumps({"tasks": list(tasks)}, ensure_ascii=False)]


def huge_string_arguments(name: str, key: str, size: int, stop: threading.Event) -> tuple[str, Iterator[str]]:
    """A call whose one string argument is ``size`` characters long, produced 64 KiB at a time."""

    def pieces() -> Iterator[str]:
        yield json.dumps({key: ""})[:-2]  # '{"key": "'
        sent, block = 0, "x" * 65536
        while sent < size and not stop.is_set():
            yield block
            sent += len(block)
        yield '"}'

    return name, pieces()


def endless(piece: str, stop: threading.Event) -> Iterator[str]:
    while not stop.is_set():
        yield piece


def drip(chunks: Iterable[bytes], every: float, stop: threading.Event) -> Iterator[bytes]:
    """The same bytes, one byte every ``every`` seconds (slowloris)."""
    for byte in (bytes([b]) for chunk in chunks for b in chunk):
        if stop.wait(every):
            return
        yield byte


def keepalives(protocol: str, every: float, stop: threading.Event) -> Iterator[bytes]:
    """A reply that starts, then only sends comments and empty keep-alives, forever."""
    yield next(reply(protocol))
    empty = event({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": None}]}) if protocol == "openai" \
        else event({"type": "ping"}, "ping")
    while not stop.wait(every):
        yield b": keep-alive\n\n"
        yield empty
        yield b"\n"


def done_replies(protocol: str, count: int) -> list[Plan]:
    """Replies that claim to be finished (no tool call): the loop refuses them while tasks are open."""
    return [Plan(chunks=list(reply(protocol, ["All done."]))) for _ in range(count)]


@dataclass(frozen=True)
class Case:
    """One misbehaviour: the server's plans, the environment that sets the limit low, the end expected."""

    name: str
    plans: Callable[[str, threading.Event], list[Plan]]
    env: dict[str, str] = field(default_factory=dict)
    max_runtime_s: float = 120.0
    max_cost_usd: float = 2.0
    code: str | None = None  # the error event's code ("A|B": either), None when no provider error is expected
    notes: tuple[str, ...] = ()  # codes of non-terminal error events also expected (each once)
    model: str | None = None  # the configured model (BESSER_LLM_MODEL), when not the protocol's default
    requests: int | None = None  # how many requests reach the endpoint, when the case fixes it
    status: str | None = None  # the run's end status, when not the one its code implies
    phase: str = "gap"  # the phase the error ends (gap: the run fails; customize: Phase 3 still runs)
    slow: bool = False


LIMITS = {"BESSER_LLM_MAX_REPLY_CHARS": "300000", "BESSER_LLM_MAX_REPLY_BYTES": str(4 * MB),
          "BESSER_LLM_MAX_ARGUMENT_CHARS": str(1 * MB)}
ODD_LINE_ENDS = "Add a field\u2028named isbn\u2029to Book\u0085and validate it"
DEEP = 500
DEEP_ARGUMENTS = '{"path": "deep.py", "content": "X = 1\\n", "extra": ' + "[" * DEEP + "]" * DEEP + "}"


def _refused_then_done(protocol: str, stop: threading.Event) -> list[Plan]:
    return [
        Plan(chunks=list(reply(protocol, call=tasks_call("Add an isbn field to Book " + "y" * 600_000)))),
        Plan(chunks=list(reply(protocol, call=("run_command", [json.dumps({"command": "z" * 900_000})])))),
        *done_replies(protocol, 4),
    ]


CASES = (
    Case("endless_text", lambda p, stop: [Plan(chunks=reply(p, endless("lorem ipsum " * 500, stop)))], LIMITS,
         code="REPLY_TOO_LARGE"),
    Case("planning_200mb", lambda p, stop: [Plan(chunks=reply(p, call=huge_string_arguments("submit_tasks", "tasks", 200 * MB, stop)))],
         LIMITS, code="REPLY_TOO_LARGE"),
    Case("huge_tool_arguments", lambda p, stop: [
        Plan(chunks=list(reply(p, call=tasks_call("Add an isbn field to Book")))),
        Plan(chunks=reply(p, call=huge_string_arguments("write_file", "content", 200 * MB, stop))),
    ], LIMITS, code="REPLY_TOO_LARGE", phase="customize"),
    Case("slowloris_bytes", lambda p, stop: [Plan(chunks=drip(reply(p, ["never finished " * 20]), 1.0, stop))],
         max_runtime_s=3.0, code="BUDGET", slow=True),
    Case("slowloris_comments", lambda p, stop: [Plan(chunks=keepalives(p, 0.5, stop))],
         {"BESSER_LLM_TIMEOUT_SECONDS": "2"}, code="TIMEOUT", slow=True),
    Case("retry_after_59", lambda p, stop: [
        json_error(429, {"error": {"type": "rate_limit_error", "message": "slow down"}}, {"retry-after": "59"}) for _ in range(5)
    ], max_runtime_s=20.0, code="BUDGET"),
    Case("u2028_in_json", lambda p, stop: [Plan(chunks=list(reply(p, call=tasks_call(ODD_LINE_ENDS)))), *done_replies(p, 4)]),
    # default limits: a 600 KB task and a 900 KB call fit in them (and cost ~$3.40 at Sonnet's price)
    Case("no_amplification", _refused_then_done, max_cost_usd=20.0),
    # -- red team, round 2 --
    # the endpoint names a model with no price on every turn and reports 400,000 tokens a turn: the bill
    # is still the configured model's, so the cap fires after the first such turn, and the name is noted once
    Case("unpriced_model_named", lambda p, stop: [
        Plan(chunks=list(reply(p, call=tasks_call("Add an isbn field to Book"), model="my-free-model"))),
        *[Plan(chunks=list(reply(p, ["working on it"], call=("list_files", ["{}"]), model="my-free-model", usage=(400_000, 2_000))))
          for _ in range(7)],
    ], max_cost_usd=0.01, code="BUDGET|COST_CAP", notes=("MODEL_MISMATCH",), phase="customize"),  # mid-stream or between turns
    # a cost cap over a configured model with no known price cannot be kept: refused by name, nothing sent
    Case("unpriced_model_configured", lambda p, stop: done_replies(p, 3), model="my-local-model", max_cost_usd=0.01,
         code="COST_UNPRICED", requests=0, status="completed"),  # Phase 2 skipped, named; Phases 1 and 3 ran
    # a 5 MB tool name, a 5 MB call id: cut off while streaming, the limit named
    Case("huge_tool_name", lambda p, stop: [
        Plan(chunks=list(reply(p, call=tasks_call("Add an isbn field to Book")))),
        Plan(chunks=reply(p, call=("w" * (5 * MB), ["{}"]))),
    ], code="REPLY_TOO_LARGE", phase="customize"),
    Case("huge_call_id", lambda p, stop: [
        Plan(chunks=list(reply(p, call=tasks_call("Add an isbn field to Book")))),
        Plan(chunks=reply(p, call=("list_files", ["{}"]), call_id="i" * (5 * MB))),
    ], code="REPLY_TOO_LARGE", phase="customize"),
    # valid JSON nested 500 deep: refused at the boundary by name (an observation); the run goes on
    Case("deep_arguments", lambda p, stop: [
        Plan(chunks=list(reply(p, call=tasks_call("Add an isbn field to Book")))),
        Plan(chunks=list(reply(p, call=("write_file", [DEEP_ARGUMENTS])))),
        *done_replies(p, 4),
    ]),
)


def case(name: str) -> Case:
    return next(c for c in CASES if c.name == name)
