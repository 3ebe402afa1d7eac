"""Scripted providers: authored turns for teaching and demos, labelled ``scripted:<name>``.

A script is a list of turns, each some text and tool calls, answered one per request in
order. A turn may also be a function of the request (to react to a tool result). Nothing
here pretends to be a model: the label and ``describe()`` say it is a script. Running past
the last turn fails with ``REPLAY_DIVERGED`` naming the script and the turn asked for.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from kernel_ext import safejson
from kernel_ext.errors import ErrorCode
from kernel_ext.providers.base import Provider
from kernel_ext.providers.bounds import CallBudget
from kernel_ext.providers.cancel import cancelled
from kernel_ext.providers.events import Event, ProviderError, Stop, TextDelta, ToolCallDone, Usage, UsageUpdate
from kernel_ext.providers.messages import Request, ToolUse
from kernel_ext.providers.meter import CostMeter

__all__ = ["Script", "ScriptedProvider", "Turn", "call"]


def call(name: str, arguments: Mapping[str, Any] | str | None = None, id: str = "") -> ToolUse:
    """An authored tool call; ``id`` is filled in per turn when left empty."""
    text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments or {}), ensure_ascii=False)
    return ToolUse(id, name, text)


@dataclass(frozen=True)
class Turn:
    text: str = ""
    tool_calls: tuple[ToolUse, ...] = ()
    usage: Usage | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Turn:
        calls = tuple(call(str(c["name"]), c.get("arguments"), str(c.get("id", ""))) for c in data.get("tool_calls", ()))
        usage = Usage(**data["usage"]) if isinstance(data.get("usage"), dict) else None
        return cls(str(data.get("text", "")), calls, usage)


TurnSource = Turn | Callable[[Request], Turn]


@dataclass(frozen=True)
class Script:
    name: str
    turns: tuple[TurnSource, ...]
    model: str = "scripted"

    @classmethod
    def of(cls, name: str, turns: Iterable[TurnSource], model: str = "scripted") -> Script:
        return cls(name, tuple(turns), model)

    @classmethod
    def from_file(cls, path: str | Path, root: str | None = None) -> Script:
        """``{"name": ..., "turns": [{"text": ..., "tool_calls": [{"name", "arguments"}]}]}``, read like
        every file a request names (``sources.py``: under ``root`` when given, regular, bounded)."""
        from kernel_ext.errors import ToolFailure
        from kernel_ext.providers.sources import Source, read_source

        path = Path(path)
        try:
            data = safejson.loads(read_source(Source("scripted", str(path), root)))
            turns = tuple(Turn.from_dict(t) for t in data["turns"])
            name = str(data.get("name") or path.stem)
        except ToolFailure as exc:
            raise ProviderError(exc.code, exc.message, exc.data) from None
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            problem = f"script {str(path)!r} is unusable: {type(exc).__name__}: {exc}"
        else:
            return cls(name, turns, str(data.get("model", "scripted")))
        raise ProviderError(ErrorCode.NOT_CONFIGURED, problem)


class ScriptedProvider(Provider):
    kind: ClassVar[str] = "scripted"

    def __init__(self, script: Script, *, meter: CostMeter | None = None):
        super().__init__(model=script.model, label=f"scripted:{script.name}", meter=meter)
        self.script = script
        self.position = 0

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "turns": len(self.script.turns), "notice": "an authored script, not a live model"}

    async def _events(
        self, request: Request, cancel: asyncio.Event | None, budget: CallBudget | None = None
    ) -> AsyncGenerator[Event, None]:
        number = self.position + 1
        if self.position >= len(self.script.turns):
            raise ProviderError(
                ErrorCode.REPLAY_DIVERGED,
                f"script {self.script.name!r} has {len(self.script.turns)} turn(s); the run asked for turn {number}",
            )
        source = self.script.turns[self.position]
        self.position += 1
        turn = source if isinstance(source, Turn) else source(request)
        for piece in re.findall(r"\s*\S+\s*", turn.text) or ([turn.text] if turn.text else []):
            if cancel is not None and cancel.is_set():
                raise cancelled("playing a script")
            yield TextDelta(piece)
            await asyncio.sleep(0)
        for index, tool in enumerate(turn.tool_calls, 1):
            yield ToolCallDone(ToolUse(tool.id or f"{self.script.name}-{number}-{index}", tool.name, tool.arguments))
        if turn.usage is not None:
            yield UsageUpdate(turn.usage, self.model)
        yield Stop("tool_use" if turn.tool_calls else "end", "scripted")
