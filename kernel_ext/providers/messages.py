"""A provider-neutral conversation: what the agent said and heard, independent of any wire format.

The pipeline keeps one ``Conversation``; each provider translates it to its own protocol at
send time, so switching providers (or replaying a recording made with another one) never
rewrites history. Everything here is plain data with a JSON form, which is also what
cassettes store.

A conversation is re-sent whole on every turn, so what it keeps is bounded when it is added
(``summarise``): a huge reply, a refused 50 MB call or a long observation is kept as its head
and a note of what was omitted, never re-sent whole. The caller still acts on the original.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from kernel_ext.safetext import MAX_CALL_ID_CHARS, MAX_TOOL_NAME_CHARS, clip

__all__ = [
    "ECHO_ARGUMENT_CHARS",
    "ECHO_RESULT_CHARS",
    "ECHO_TEXT_CHARS",
    "AssistantMessage",
    "Conversation",
    "Message",
    "Request",
    "SchemaSource",
    "ToolOffer",
    "ToolResultMessage",
    "ToolUse",
    "UserMessage",
    "admit",
    "message_from_dict",
    "message_to_dict",
    "summarise",
    "tool_schemas",
]

ECHO_TEXT_CHARS = 16_000  # a model's own text, as it is sent back
ECHO_ARGUMENT_CHARS = 32_000  # one call's arguments, as they are sent back
ECHO_RESULT_CHARS = 64_000  # one tool observation


def summarise(text: str, limit: int) -> str:
    """``text`` when it fits in ``limit`` characters, else its head and a note of what was cut."""
    if len(text) <= limit:
        return text
    note = f"\n[... {len(text) - limit} chars omitted]"
    return text[: max(limit - len(note), 0)] + note if limit > len(note) else text[:limit]


@dataclass(frozen=True)
class ToolUse:
    """One complete tool call a model proposed. ``arguments`` is the JSON text exactly as sent.

    ``id`` is the id on the wire: the endpoint's own (untrusted; used only to pair the result
    with the call in the next request), or one the host invented where the endpoint sent none
    or repeated one. ``host_id`` is the identity the host minted (``admit``): events, cards,
    decisions and the boundary use only that. It stays out of the wire form and cassettes.
    """

    id: str
    name: str
    arguments: str = "{}"
    host_id: str = ""

    def parsed(self) -> dict[str, Any] | None:
        """The arguments as a JSON object, or None when they are not one (the boundary says why).

        Lone surrogates (``"\\ud800"`` decodes to one) become U+FFFD: what the host keeps from
        here (planned tasks, the wire form) is valid text. Arguments nested past
        ``safejson.MAX_JSON_DEPTH`` are None too: the boundary refuses them by name, parsing
        the raw text itself.
        """
        from kernel_ext.safejson import deeper_than
        from kernel_ext.safetext import valid_unicode

        try:
            value = json.loads(self.arguments)
        except (ValueError, RecursionError):
            return None
        if not isinstance(value, dict) or deeper_than(value):
            return None
        return valid_unicode(value)

    def bounded(self, limit: int = ECHO_ARGUMENT_CHARS) -> ToolUse:
        """This call as it may be sent back: arguments past ``limit`` become a JSON object
        holding their head and a note of the size (the original was what the host acted on)."""
        if len(self.arguments) <= limit:
            return self
        head = summarise(self.arguments, max(limit - 64, 0))
        return ToolUse(self.id, self.name, json.dumps({"_omitted_arguments": head}, ensure_ascii=False))

    def to_call(self) -> Any:
        """The boundary's ``ToolCall`` for this proposal, under the host's id (imported here to keep providers light)."""
        from kernel_ext.boundary.calls import ToolCall

        if not self.host_id:
            raise ValueError(f"tool call {self.name!r} was not admitted: it has no host-minted id")
        return ToolCall(self.host_id, self.name, self.arguments)


def admit(calls: Iterable[ToolUse], mint: Callable[[], str]) -> tuple[ToolUse, ...]:
    """Give each proposed call a host id from ``mint``, and a wire id that pairs its result.

    The endpoint's id is kept for the wire when it is a non-empty string not already used in
    this reply and at most ``MAX_CALL_ID_CHARS`` long; otherwise (none sent, ``call_0`` twice,
    a megabyte of id) the host id is the wire id too, so the next request still pairs each
    result with exactly one call. A name past ``MAX_TOOL_NAME_CHARS`` is clipped (no tool has
    such a name: it is refused as unknown, and never echoed whole). A live stream never gets
    here with either: ``ReplyWatch`` cuts it off; this holds for every other provider.
    """
    out: list[ToolUse] = []
    seen: set[str] = set()
    for call in calls:
        host_id = mint()
        usable = isinstance(call.id, str) and call.id and len(call.id) <= MAX_CALL_ID_CHARS and call.id not in seen
        wire = call.id if usable else host_id
        while wire in seen:
            wire += "_"
        seen.add(wire)
        out.append(replace(call, id=wire, name=clip(str(call.name), MAX_TOOL_NAME_CHARS), host_id=host_id))
    return tuple(out)


@dataclass(frozen=True)
class UserMessage:
    text: str
    role: str = field(default="user", init=False)


@dataclass(frozen=True)
class AssistantMessage:
    text: str = ""
    tool_calls: tuple[ToolUse, ...] = ()
    role: str = field(default="assistant", init=False)


@dataclass(frozen=True)
class ToolResultMessage:
    """The observation of one tool call, answered to the model under the call's id."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    role: str = field(default="tool", init=False)


Message = UserMessage | AssistantMessage | ToolResultMessage


def message_to_dict(message: Message) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        return {"role": "user", "text": message.text}
    if isinstance(message, AssistantMessage):
        out: dict[str, Any] = {"role": "assistant", "text": message.text}
        if message.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
            ]
        return out
    if isinstance(message, ToolResultMessage):
        return {
            "role": "tool",
            "call_id": message.call_id,
            "name": message.name,
            "content": message.content,
            "is_error": message.is_error,
        }
    raise TypeError(f"not a conversation message: {type(message).__name__}")


def message_from_dict(data: Mapping[str, Any]) -> Message:
    role = data.get("role")
    if role == "user":
        return UserMessage(str(data["text"]))
    if role == "assistant":
        calls = tuple(
            ToolUse(str(c["id"]), str(c["name"]), str(c.get("arguments", "{}")))
            for c in data.get("tool_calls", ())
        )
        return AssistantMessage(str(data.get("text", "")), calls)
    if role == "tool":
        return ToolResultMessage(
            str(data["call_id"]), str(data["name"]), str(data["content"]), bool(data.get("is_error", False))
        )
    raise ValueError(f"unknown message role {role!r}")


@dataclass
class Conversation:
    """The system prompt plus the ordered messages of one agent run."""

    system: str = ""
    messages: list[Message] = field(default_factory=list)

    def user(self, text: str) -> UserMessage:
        return self._add(UserMessage(summarise(text, ECHO_RESULT_CHARS)))

    def assistant(self, text: str = "", tool_calls: Iterable[ToolUse] = ()) -> AssistantMessage:
        """The model's turn, bounded as it will be sent back (``summarise``, ``ToolUse.bounded``)."""
        return self._add(AssistantMessage(summarise(text, ECHO_TEXT_CHARS), tuple(c.bounded() for c in tool_calls)))

    def tool_result(self, call_id: str, name: str, content: str, is_error: bool = False) -> ToolResultMessage:
        """Answer a call; ``call_id`` may be the host's id, answered under the call's wire id."""
        return self._add(ToolResultMessage(self.wire_id(call_id), name, summarise(content, ECHO_RESULT_CHARS), is_error))

    def add_result(self, result: Any) -> ToolResultMessage:
        """Answer a boundary ``ToolResult`` (refusals are observations too, flagged as errors)."""
        return self.tool_result(result.call_id, result.name, result.observation, not result.ok)

    def wire_id(self, call_id: str) -> str:
        """The wire id of the latest call the host admitted as ``call_id`` (else ``call_id`` itself)."""
        for message in reversed(self.messages):
            if isinstance(message, AssistantMessage):
                for call in message.tool_calls:
                    if call.host_id and call.host_id == call_id:
                        return call.id
        return call_id

    def _add(self, message: Message) -> Any:
        self.messages.append(message)
        return message

    def to_dict(self) -> dict[str, Any]:
        return {"system": self.system, "messages": [message_to_dict(m) for m in self.messages]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Conversation:
        return cls(str(data.get("system", "")), [message_from_dict(m) for m in data.get("messages", ())])


@dataclass(frozen=True)
class Request:
    """One call to a provider: a frozen copy of the conversation plus the tools offered."""

    system: str
    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...] = ()
    max_tokens: int | None = None

    @classmethod
    def of(cls, conversation: Conversation, tools: Iterable[ToolOffer] = (), max_tokens: int | None = None) -> Request:
        return cls(conversation.system, tuple(conversation.messages), tool_schemas(tools), max_tokens)


class SchemaSource(Protocol):
    """What offers itself as a tool (a ``ToolSpec``): its schema in provider-neutral form."""

    def provider_schema(self) -> dict[str, Any]: ...


ToolOffer = SchemaSource | Mapping[str, Any]


def tool_schemas(tools: Iterable[ToolOffer]) -> tuple[dict[str, Any], ...]:
    """Normalise tools to ``{name, description, parameters}``.

    Accepts ``ToolSpec`` objects (anything with ``provider_schema()``), a ``ToolCatalog``, or
    ready dicts of that shape; a duplicate or nameless tool is a programming error.
    """
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for tool in tools:
        schema = tool.provider_schema() if hasattr(tool, "provider_schema") else tool
        if not isinstance(schema, Mapping) or not isinstance(schema.get("name"), str) or not schema["name"]:
            raise ValueError(f"not a tool schema: {schema!r:.120}")
        name = schema["name"]
        if name in seen:
            raise ValueError(f"tool {name!r} offered twice")
        seen.add(name)
        parameters = schema.get("parameters") or {"type": "object", "properties": {}}
        out.append({"name": name, "description": str(schema.get("description", "")), "parameters": dict(parameters)})
    return tuple(out)
