"""OpenAI-compatible Chat Completions, streamed: OpenAI, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter.

Tool calls arrive as fragments keyed by ``index``: the first carries the id and name, the
rest pieces of the arguments string, which are concatenated exactly as sent. Calls are
complete once the choice has a ``finish_reason``. Usage comes in a final chunk when
``stream_options.include_usage`` is honoured; servers that ignore it simply report none.
"""

from __future__ import annotations

import io
import json
from typing import Any, ClassVar
from urllib.parse import urlsplit

from kernel_ext.errors import ErrorCode
from kernel_ext.providers.bounds import NoWatch, ReplyWatch
from kernel_ext.providers.events import Event, ProviderError, Stop, TextDelta, ToolCallDone, Usage, UsageUpdate
from kernel_ext.providers.live import LiveProvider, StreamSource
from kernel_ext.providers.messages import AssistantMessage, Request, ToolResultMessage, ToolUse, UserMessage
from kernel_ext.providers.sse import SSEEvent

__all__ = ["OpenAICompatProvider", "wire_messages", "wire_tools"]

_STOP = {"stop": "end", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens"}


class OpenAICompatProvider(LiveProvider):
    protocol: ClassVar[str] = "openai"
    key_env: ClassVar[str] = "OPENAI_API_KEY"
    path: ClassVar[str] = "/chat/completions"

    def _headers(self, key: str | None) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        if key:
            headers["authorization"] = f"Bearer {key}"
        return headers

    def _body(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": wire_messages(request),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = wire_tools(request.tools)
        if request.max_tokens:
            # OpenAI's own API wants the newer name (o-series refuse the old one);
            # compatible servers widely understand only ``max_tokens``.
            official = (urlsplit(self.base_url).hostname or "").endswith("api.openai.com")
            body["max_completion_tokens" if official else "max_tokens"] = request.max_tokens
        return body

    def _assembler(self, transport: StreamSource, watch: ReplyWatch | None = None) -> ChatStream:
        return ChatStream(transport, watch)


def wire_tools(tools: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": t["name"], "description": t["description"], "parameters": t["parameters"]}}
        for t in tools
    ]


def wire_messages(request: Request) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for message in request.messages:
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": message.text})
        elif isinstance(message, AssistantMessage):
            wire: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            if message.tool_calls:
                wire["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in message.tool_calls
                ]
            elif not message.text:
                wire["content"] = ""
            out.append(wire)
        elif isinstance(message, ToolResultMessage):
            out.append({"role": "tool", "tool_call_id": message.call_id, "content": message.content})
    return out


class ChatStream:
    """Reassembles one streamed chat completion (choice 0) into provider events."""

    def __init__(self, transport: StreamSource, watch: ReplyWatch | None = None):
        self.transport = transport
        self.watch: ReplyWatch | NoWatch = watch if watch is not None else NoWatch()
        self.done = False
        self.finish_reason: str | None = None
        self.model = ""
        self.usage: dict[str, Any] | None = None
        self._calls: dict[int, dict[str, Any]] = {}
        self._emitted = False

    def feed(self, sse: SSEEvent) -> list[Event]:
        data = sse.data.strip()
        if data == "[DONE]":
            self.done = True
            return []
        chunk = _json(data)
        if chunk is None:
            raise ProviderError(ErrorCode.UPSTREAM_LLM, f"{self.transport.endpoint} sent an unreadable stream chunk")
        if chunk.get("error"):
            raise self.transport.error_in_stream(chunk)
        self.model = str(chunk.get("model") or self.model)
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]  # some servers repeat running totals: keep the last
        out: list[Event] = []
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if isinstance(text, str) and text:
                self.watch.on_text(len(text))
                out.append(TextDelta(text))
            for part in delta.get("tool_calls") or ():
                self._merge(part)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
                out.extend(self._complete_calls())
        return out

    def _merge(self, part: dict[str, Any]) -> None:
        index = part.get("index")
        if not isinstance(index, int):
            # servers that omit the index: match by id, else a new call
            index = next((i for i, c in self._calls.items() if part.get("id") and c["id"] == part["id"]), len(self._calls))
        if index not in self._calls:
            self.watch.on_call()
        call = self._calls.setdefault(index, {"id": "", "name": "", "arguments": io.StringIO()})
        function = part.get("function") or {}
        self.watch.on_identity(function.get("name"), part.get("id"))  # before either is kept
        if part.get("id") and not call["id"]:
            call["id"] = str(part["id"])
        if function.get("name") and not call["name"]:
            call["name"] = str(function["name"])
        piece = function.get("arguments")
        if isinstance(piece, dict):  # a few servers send an object
            piece = json.dumps(piece)
        if isinstance(piece, str):
            self.watch.on_arguments(index, len(piece))
            call["arguments"].write(piece)

    def _complete_calls(self) -> list[Event]:
        if self._emitted:
            return []
        self._emitted = True
        out: list[Event] = []
        for index in sorted(self._calls):
            call = self._calls[index]
            arguments = call["arguments"].getvalue() or "{}"
            out.append(ToolCallDone(ToolUse(call["id"], call["name"], arguments)))  # no id: the host invents one (``admit``)
        return out

    def finish(self) -> list[Event]:
        if self.finish_reason is None and not self.done:
            raise ProviderError(
                ErrorCode.UPSTREAM_LLM,
                f"the stream from {self.transport.endpoint} ended before the reply was complete",
            )
        out = self._complete_calls()
        if self.usage is not None:
            usage, problems = usage_from_openai(self.usage)
            out.append(UsageUpdate(usage, self.model, problems=problems))
        raw = self.finish_reason or ""
        reason = _STOP.get(raw, raw or "end")
        if self._calls and reason == "end":
            reason = "tool_use"  # a complete native call with finish_reason "stop" (seen on some servers)
        out.append(Stop(reason, raw))
        return out


def usage_from_openai(usage: dict[str, Any]) -> tuple[Usage, tuple[str, ...]]:
    """The call's usage (cached prompt tokens apart) and the figures refused (``meter.read_count``)."""
    from kernel_ext.providers.meter import read_count

    details = usage.get("prompt_tokens_details")
    prompt, no_prompt = read_count("prompt_tokens", usage.get("prompt_tokens"))
    output, no_output = read_count("completion_tokens", usage.get("completion_tokens"))
    cached, no_cached = read_count("cached_tokens", details.get("cached_tokens") if isinstance(details, dict) else None)
    cached = min(cached, prompt)
    return Usage(prompt - cached, output, cached, 0), tuple(p for p in (no_prompt, no_output, no_cached) if p)


def _json(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
