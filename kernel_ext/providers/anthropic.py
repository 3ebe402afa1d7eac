"""Anthropic Messages, streamed, with tool use and usage.

Each content block is opened (``content_block_start``), fed (``text_delta`` or
``input_json_delta`` pieces of the tool input's JSON text) and closed; a tool call is
complete when its block stops. Input token counts come with ``message_start``, output
counts (cumulative) with ``message_delta``. Tool results travel inside user turns, and
consecutive turns of one role are merged, as the API requires.
"""

from __future__ import annotations

import io
import json
from typing import Any, ClassVar

from kernel_ext.errors import ErrorCode
from kernel_ext.providers.bounds import NoWatch, ReplyWatch
from kernel_ext.providers.events import Event, ProviderError, Stop, TextDelta, ToolCallDone, Usage, UsageUpdate
from kernel_ext.providers.live import LiveProvider, StreamSource
from kernel_ext.providers.messages import AssistantMessage, Request, ToolResultMessage, ToolUse, UserMessage
from kernel_ext.providers.sse import SSEEvent

__all__ = ["API_VERSION", "DEFAULT_MAX_TOKENS", "AnthropicProvider", "wire_messages", "wire_tools"]

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")  # Usage's order
_STOP = {"end_turn": "end", "stop_sequence": "end", "tool_use": "tool_use", "max_tokens": "max_tokens"}


class AnthropicProvider(LiveProvider):
    protocol: ClassVar[str] = "anthropic"
    key_env: ClassVar[str] = "ANTHROPIC_API_KEY"
    path: ClassVar[str] = "/v1/messages"

    def _path(self) -> str:
        # ANTHROPIC_BASE_URL is conventionally the host without /v1; accept both forms
        return "/messages" if self.base_url.endswith("/v1") else self.path

    def _headers(self, key: str | None) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "text/event-stream", "anthropic-version": API_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    def _body(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": wire_messages(request),
            "stream": True,
        }
        if request.system:
            body["system"] = request.system
        if request.tools:
            body["tools"] = wire_tools(request.tools)
        return body

    def _assembler(self, transport: StreamSource, watch: ReplyWatch | None = None) -> MessageStream:
        return MessageStream(transport, watch)


def wire_tools(tools: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    return [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in tools]


def wire_messages(request: Request) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def push(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for message in request.messages:
        if isinstance(message, UserMessage):
            push("user", [{"type": "text", "text": message.text}])
        elif isinstance(message, AssistantMessage):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": message.text}] if message.text else []
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": _input_object(c)} for c in message.tool_calls
            ]
            if blocks:  # the API refuses empty text blocks; an empty turn carries nothing
                push("assistant", blocks)
        elif isinstance(message, ToolResultMessage):
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.call_id, "content": message.content}
            if message.is_error:
                block["is_error"] = True
            push("user", [block])
    return out


def _input_object(call: ToolUse) -> dict[str, Any]:
    """tool_use input must be an object; arguments that were not one are kept, wrapped."""
    parsed = call.parsed()
    return parsed if parsed is not None else {"_unparsed_arguments": call.arguments}


class MessageStream:
    """Reassembles one streamed Messages reply into provider events."""

    def __init__(self, transport: StreamSource, watch: ReplyWatch | None = None):
        self.transport = transport
        self.watch: ReplyWatch | NoWatch = watch if watch is not None else NoWatch()
        self.done = False
        self.model = ""
        self.stop_reason: str | None = None
        self.usage: dict[str, int] = {}
        self.problems: list[str] = []
        self._blocks: dict[int, dict[str, Any]] = {}

    def feed(self, sse: SSEEvent) -> list[Event]:
        entry: dict[str, Any] | None
        try:
            payload = json.loads(sse.data)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            raise ProviderError(ErrorCode.UPSTREAM_LLM, f"{self.transport.endpoint} sent an unreadable stream event")
        kind = payload.get("type") or sse.event
        if kind == "error":
            raise self.transport.error_in_stream(payload)
        if kind == "message_start":
            message = payload.get("message") or {}
            self.model = str(message.get("model") or "")
            self._count(message.get("usage"))
        elif kind == "content_block_start":
            block = payload.get("content_block") or {}
            index = int(payload.get("index", len(self._blocks)))
            wire_id = block.get("id")  # untrusted, kept only for the wire; missing: the host invents one
            if block.get("type") == "tool_use":
                self.watch.on_identity(block.get("name"), wire_id)  # before either is kept
            entry = {"type": block.get("type"), "id": wire_id if isinstance(wire_id, str) else "", "name": block.get("name", ""),
                     "json": io.StringIO()}
            if block.get("type") == "tool_use":
                self.watch.on_call()
                if block.get("input"):
                    entry["initial"] = json.dumps(block["input"])  # a proxy may send the input whole
                    self.watch.on_arguments(index, len(entry["initial"]))
            self._blocks[index] = entry
            if block.get("type") == "text" and block.get("text"):
                text = str(block["text"])
                self.watch.on_text(len(text))
                return [TextDelta(text)]
        elif kind == "content_block_delta":
            delta = payload.get("delta") or {}
            index = int(payload.get("index", -1))
            entry = self._blocks.get(index)
            if delta.get("type") == "text_delta" and delta.get("text"):
                text = str(delta["text"])
                self.watch.on_text(len(text))
                return [TextDelta(text)]
            if delta.get("type") == "input_json_delta" and entry is not None:
                piece = str(delta.get("partial_json", ""))
                self.watch.on_arguments(index, len(piece))
                entry["json"].write(piece)
        elif kind == "content_block_stop":
            entry = self._blocks.get(int(payload.get("index", -1)))
            if entry is not None and entry["type"] == "tool_use" and not entry.get("emitted"):
                entry["emitted"] = True
                arguments = entry["json"].getvalue() or entry.get("initial") or "{}"
                return [ToolCallDone(ToolUse(str(entry["id"]), str(entry["name"]), arguments))]
        elif kind == "message_delta":
            delta = payload.get("delta") or {}
            if delta.get("stop_reason"):
                self.stop_reason = str(delta["stop_reason"])
            self._count(payload.get("usage"))
        elif kind == "message_stop":
            self.done = True
        return []

    def _count(self, usage: Any) -> None:
        """Keep the latest sane figure of each count (message_delta counts are cumulative);
        an unusable one is refused by name and the previous figure stands."""
        from kernel_ext.providers.meter import read_count

        if not isinstance(usage, dict):
            return
        for name in _USAGE_FIELDS:
            if usage.get(name) is None:
                continue
            count, problem = read_count(name, usage[name])
            if problem:
                self.problems.append(problem)
            else:
                self.usage[name] = count

    def finish(self) -> list[Event]:
        if not self.done and self.stop_reason is None:
            raise ProviderError(
                ErrorCode.UPSTREAM_LLM,
                f"the stream from {self.transport.endpoint} ended before the reply was complete",
            )
        unfinished = [e for e in self._blocks.values() if e["type"] == "tool_use" and not e.get("emitted")]
        if unfinished:
            raise ProviderError(
                ErrorCode.UPSTREAM_LLM, f"the stream from {self.transport.endpoint} ended inside a tool call"
            )
        out: list[Event] = []
        if self.usage or self.problems:
            u = self.usage
            usage = Usage(*(u.get(name, 0) for name in _USAGE_FIELDS))
            out.append(UsageUpdate(usage, self.model, problems=tuple(self.problems)))
        raw = self.stop_reason or ""
        out.append(Stop(_STOP.get(raw, raw or "end"), raw))
        return out
