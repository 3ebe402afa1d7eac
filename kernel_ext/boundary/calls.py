"""A proposed call and its observed result: the two things that cross the boundary.

A ``ToolCall`` is what a provider proposed (never an approval). A ``ToolResult``'s ``ok`` is
earned: true only when the tool really succeeded. Refusals carry a stable ``code`` and a
message that names the problem; the observation the model sees is bounded.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

MAX_OBSERVATION_CHARS = 16_000

HOST_ID = re.compile(r"c[1-9][0-9]{0,11}")  # what ``CallIds`` mints: short, URL-safe, no endpoint text


class CallIds:
    """Mints the host's call identities (``c1``, ``c2``, ...) for one run.

    An endpoint's own ids are untrusted (missing, ``call_0`` on every turn, ``/``, spaces,
    200 characters): a decision, a card and an event are keyed by the id minted here, so a
    call's identity never depends on what the endpoint sent. One minter per run (the run's
    Executor holds it); the numbers are deterministic, so a replayed run mints the same ids.
    """

    def __init__(self) -> None:
        self._next = itertools.count(1)

    def mint(self) -> str:
        return f"c{next(self._next)}"


@dataclass
class ToolCall:
    """One proposed invocation. ``arguments`` is a JSON string or a (mutable) dict."""

    id: str
    name: str
    arguments: str | dict[str, Any] = field(default_factory=dict)


class ToolError(BaseModel):
    model_config = ConfigDict(frozen=True)

    code: str
    message: str


class ToolResult(BaseModel):
    """The observation of one call, for the model (``observation``) and the UI (``data``)."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    name: str
    ok: bool
    observation: str
    data: dict[str, Any] = Field(default_factory=dict)
    error: ToolError | None = None

    @property
    def error_code(self) -> str:
        """The failure's code ("" for a success)."""
        return self.error.code if self.error is not None else ""

    @classmethod
    def success(cls, call_id: str, name: str, observation: str, data: dict[str, Any] | None = None) -> ToolResult:
        return cls(call_id=call_id, name=name, ok=True, observation=bound(observation), data=dict(data or {}))

    @classmethod
    def failure(
        cls, call_id: str, name: str, code: str, message: str, data: dict[str, Any] | None = None
    ) -> ToolResult:
        text = bound(f"error [{code}]: {message}")
        return cls(
            call_id=call_id,
            name=name,
            ok=False,
            observation=text,
            data=dict(data or {}),
            error=ToolError(code=code, message=message),
        )

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False, indent=2)


def bound(text: str, limit: int = MAX_OBSERVATION_CHARS) -> str:
    """Cut ``text`` to ``limit`` characters, saying how much was cut (head and tail kept)."""
    if len(text) <= limit:
        return text
    head = limit * 3 // 4
    tail = limit - head - 80
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}"
