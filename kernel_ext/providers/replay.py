"""Replaying a cassette: a recorded session answered again, offline, labelled as a replay.

Each request must match the recorded one; the first difference fails the call with
``ReplayDiverged`` (code ``REPLAY_DIVERGED``): a message saying in plain words what this machine
observed differently (``providers/divergence.py``) and where (``messages[3].content``), the
recorded and sent excerpts in its data. The pipeline ends the run on it. ``strict=False`` ignores the content of tool results (paths
and timings that legitimately differ between machines) but still checks everything else.
Where recording cut a key (``[redacted]``), any text matches.
Recorded usage is priced again, so the cost line and a cost cap behave as they did live.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any, ClassVar

from kernel_ext import safejson
from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.providers.base import Provider
from kernel_ext.providers.bounds import CallBudget
from kernel_ext.providers.cancel import cancelled
from kernel_ext.providers.divergence import HINT, ReplayDiverged, beyond, explain
from kernel_ext.providers.events import Event, ProviderError, Retrying, Stop, TextDelta, ToolCallDone, UsageUpdate
from kernel_ext.providers.messages import Request, ToolUse
from kernel_ext.providers.meter import CostMeter, checked_usage
from kernel_ext.providers.recording import CASSETTE_VERSION, request_record
from kernel_ext.providers.redact import MASK, redact
from kernel_ext.providers.sources import Source, read_source

__all__ = ["Cassette", "ReplayProvider", "event_from_dict", "first_difference", "read_cassette"]

_MISSING = object()


class Cassette:
    """A cassette read into memory: the header and each exchange's full request."""

    def __init__(self, path: Path, header: dict[str, Any], exchanges: list[dict[str, Any]]):
        self.path = path
        self.header = header
        self.exchanges = exchanges

    @property
    def recorded_from(self) -> dict[str, Any]:
        return dict(self.header.get("recorded_from") or {})


def read_cassette(path: str | Path, root: str | None = None) -> Cassette:
    """A cassette file, held like every file a request names (``sources.py``: under ``root`` when
    given, regular, never waited on, bounded); a refusal names the file and why."""
    path = Path(path)
    try:
        lines = read_source(Source("replay", str(path), root)).splitlines()
    except ToolFailure as exc:
        raise ProviderError(exc.code, exc.message, exc.data) from None
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = safejson.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            raise ProviderError(ErrorCode.NOT_CONFIGURED, f"cassette {path.name}: line {number} is not a JSON object")
        records.append(record)
    if not records or records[0].get("cassette") != CASSETTE_VERSION:
        raise ProviderError(ErrorCode.NOT_CONFIGURED, f"{path.name} is not a version {CASSETTE_VERSION} cassette")
    exchanges: list[dict[str, Any]] = []
    messages: list[Any] = []
    system = ""
    for record in records[1:]:
        system = record.get("system", system)
        messages = messages[: int(record.get("keep", 0))] + list(record.get("append", ()))
        exchanges.append(
            {
                "request": {"system": system, "messages": messages, "tools": record.get("tools", [])},
                "events": record.get("events", []),
                "error": record.get("error"),
            }
        )
    return Cassette(path, records[0], exchanges)


class ReplayProvider(Provider):
    kind: ClassVar[str] = "replay"

    def __init__(self, cassette: str | Path | Cassette, *, strict: bool = True, meter: CostMeter | None = None,
                 root: str | None = None):
        self.cassette = cassette if isinstance(cassette, Cassette) else read_cassette(cassette, root)
        recorded = self.cassette.recorded_from
        super().__init__(model=str(recorded.get("model", "")), label=f"replay:{self.cassette.path.name}", meter=meter)
        self.strict = strict
        self.position = 0

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "cassette": str(self.cassette.path),
            "recorded_from": self.cassette.recorded_from.get("label", ""),
            "notice": "replayed from a recording, not a live model",
        }

    def recorded_denial(self, index: int, count: int) -> bool | None:
        return _recorded_denial(self.cassette.exchanges, self.position, index, count)

    async def _events(
        self, request: Request, cancel: asyncio.Event | None, budget: CallBudget | None = None
    ) -> AsyncGenerator[Event, None]:
        exchanges = self.cassette.exchanges
        number = self.position + 1
        if self.position >= len(exchanges):
            why = beyond(len(exchanges))
            raise ReplayDiverged(
                ErrorCode.REPLAY_DIVERGED,
                f"the replay cannot go on: {why.words}. {HINT} [request #{number} goes beyond cassette "
                f"{self.cassette.path.name}, which holds {len(exchanges)} exchange(s)]",
                {"exchange": number, "cause": why.cause},
            )
        recorded = exchanges[self.position]
        expected, actual = recorded["request"], request_record(request)
        if not self.strict:
            expected, actual = _without_tool_output(expected), _without_tool_output(actual)
        difference = first_difference(expected, actual)
        if difference is not None:
            where, old, new = difference
            why = explain(expected, actual, where)
            message = (
                f"the replay cannot go on: {why.words}. {HINT} "
                f"[request #{number} diverges from cassette {self.cassette.path.name} at {where}]"
            )
            data = {"exchange": number, "path": where, "cause": why.cause, "recorded": redact(old), "sent": redact(new)}
            raise ReplayDiverged(ErrorCode.REPLAY_DIVERGED, redact(message), data)
        self.position += 1
        for data in recorded["events"]:
            if cancel is not None and cancel.is_set():
                raise cancelled("replaying")
            yield event_from_dict(data)
            await asyncio.sleep(0)  # let the host's UI and cancellation run between events
        if recorded.get("error"):
            error = recorded["error"]
            raise ProviderError(str(error.get("code", ErrorCode.UPSTREAM_LLM)), str(error.get("message", "")))


def _recorded_denial(exchanges: list[dict[str, Any]], position: int, index: int, count: int) -> bool | None:
    """Whether the recording's next request answered the ``index``-th call of the last turn with a denial."""
    if position >= len(exchanges):
        return None
    messages = [m for m in exchanges[position]["request"].get("messages") or [] if isinstance(m, dict)]
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    results = [m for m in messages[last + 1:] if m.get("role") == "tool"]
    if last < 0 or len(results) != count or not 0 <= index < count:
        return None
    return str(results[index].get("content") or "").startswith(f"error [{ErrorCode.APPROVAL_DENIED}]")


def _without_tool_output(record: dict[str, Any]) -> dict[str, Any]:
    messages = [{k: v for k, v in m.items() if not (m.get("role") == "tool" and k == "content")} for m in record["messages"]]
    return {**record, "messages": messages}


def first_difference(expected: Any, actual: Any, where: str = "request") -> tuple[str, str, str] | None:
    """The first place two JSON values differ: (path, recorded excerpt, actual excerpt)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in list(expected) + [k for k in actual if k not in expected]:
            found = first_difference(expected.get(key, _MISSING), actual.get(key, _MISSING), f"{where}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        for index, (old, new) in enumerate(zip(expected, actual, strict=False)):
            found = first_difference(old, new, f"{where}[{index}]")
            if found is not None:
                return found
        if len(expected) != len(actual):
            return f"{where} (length)", f"{len(expected)} item(s)", f"{len(actual)} item(s)"
        return None
    if expected == actual:
        return None
    if isinstance(expected, str) and isinstance(actual, str):
        if MASK in expected and _masked_match(expected, actual):
            return None
        return (where, *_excerpts(expected, actual))
    return where, _show(expected), _show(actual)


def _masked_match(expected: str, actual: str) -> bool:
    """A recorded string with cut keys matches any text in their place (the key is not stored)."""
    pattern = ".+?".join(re.escape(part) for part in expected.split(MASK))
    return re.fullmatch(pattern, actual, re.DOTALL) is not None


def _show(value: Any) -> str:
    if value is _MISSING:
        return "nothing"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _excerpts(old: str, new: str, width: int = 30) -> tuple[str, str]:
    """Both strings around their first differing character."""
    at = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
    start = max(0, at - width)

    def cut(text: str) -> str:
        piece = text[start : at + width]
        return ("..." if start else "") + json.dumps(piece, ensure_ascii=False) + ("..." if at + width < len(text) else "")

    return cut(old), cut(new) + f" (first difference at character {at})"


def event_from_dict(data: dict[str, Any]) -> Event:
    """One recorded event, read back as a stream would hand it over (its usage checked again)."""
    kind = data.get("kind")
    if kind == "text":
        return TextDelta(str(data["text"]))
    if kind == "tool_call":
        return ToolCallDone(ToolUse(str(data["id"]), str(data["name"]), str(data["arguments"])))
    if kind == "usage":
        usage, problems = checked_usage(data)
        # as a stream would hand it over: the name the endpoint reported (a replay prices it anew)
        return UsageUpdate(usage, str(data.get("reported_model") or data.get("model", "")), problems=problems)
    if kind == "stop":
        return Stop(str(data["reason"]), str(data.get("raw", "")))
    if kind == "retry":
        return Retrying(int(data["attempt"]), float(data["delay"]), str(data["code"]), str(data["reason"]))
    raise ValueError(f"unknown event kind {kind!r}")
