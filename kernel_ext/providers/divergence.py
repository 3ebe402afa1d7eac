"""Why a replay diverged, said in words a newcomer understands.

A recording answers only the requests it saw. When this machine observes something else (the
app cannot start because a package is missing, a tool answers differently, the checks find
another problem), the run sends a request the recording never saw. The raw difference
(``request.messages[1].text``, two excerpts) is for a developer; ``explain`` reads the
differing message by its role and says what differs here, quoting the first line that does.
``ReplayDiverged`` is the error a replay raises for it: the pipeline ends the run at once on
it (nothing after the difference can be replayed), instead of asking again round after round.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kernel_ext.errors import ErrorCode
from kernel_ext.providers.events import ProviderError

__all__ = ["Divergence", "ReplayDiverged", "beyond", "decision_diverged", "explain"]

HINT = ("A recording answers only the requests it saw, so the run stops here: make this machine match the "
        "recording's (install what is missing), or run with a live model.")
_MESSAGE = re.compile(r"^request\.messages\[(\d+)\]")
# What a check says when the app lacks a package: Python's own words, or a finding's.
# What this package's own checks say when a package is missing: an import error, Phase 1's check
# ("missing module: x"), the app environment's ("needs x>=1 (not installed)", "imports 'x', which is
# not installed"; kernel_ext/appenv, validation/validate.py).
_MISSING_MODULE = re.compile(
    r"No module named '([A-Za-z_][\w.]*)'"
    r"|missing (?:module|packages?): ([A-Za-z_][\w.\-]*(?:, [A-Za-z_][\w.\-]*)*)"
    r"|([A-Za-z0-9][\w.\-]*)(?:\[[^\]]*\])?(?:[<>=!~][^ ,()]*)? \((?:not installed|[^)]* is installed)\)"
    r"|imports '([A-Za-z_][\w.]*)', which is not installed"
)
_LINE_CHARS = 160


class ReplayDiverged(ProviderError):
    """A replay met a request its recording does not hold: the run cannot go on from here."""

    def __init__(self, code: ErrorCode | str = ErrorCode.REPLAY_DIVERGED, message: str = "", data: dict[str, Any] | None = None):
        super().__init__(code, message, data)


@dataclass(frozen=True)
class Divergence:
    # (a ReplayDiverged made by decision_diverged says "decision" in its data; no Divergence has it)
    cause: str  # "missing_module" | "observation" | "tool_result" | "request" | "system" | "tools" | "path" | "reply" | "beyond"
    words: str  # one line, for a person


def explain(expected: dict[str, Any], actual: dict[str, Any], where: str) -> Divergence:
    """What differs at ``where`` between the recorded request ``expected`` and this run's ``actual``."""
    if where.startswith("request.tools"):
        return _tools(expected.get("tools") or [], actual.get("tools") or [])
    if where.startswith("request.system"):
        return Divergence("system", "the instructions sent to the model differ from the recording's (another version of "
                                    "this package, or other settings such as shell tools)"
                                    + _lines_apart(expected.get("system"), actual.get("system")))
    if where.startswith("request.messages (length)"):
        return Divergence("path", f"this run took another path than the recording: its conversation has "
                                  f"{len(actual.get('messages') or [])} messages where the recording's had "
                                  f"{len(expected.get('messages') or [])}")
    found = _MESSAGE.match(where)
    if found is None:
        return Divergence("request", "this run's request differs from the recording's")
    index = int(found.group(1))
    old, new = _message(expected, index), _message(actual, index)
    role = new.get("role") or old.get("role")
    if role == "tool":
        return _observation(f"this machine's result of {new.get('name') or old.get('name') or 'a tool'} differs from the recording's",
                            old, new, "tool_result")
    if role == "user" and str(new.get("text", "")).startswith("[host]"):
        return _observation("this machine's checks found something the recording's did not", old, new, "observation")
    if role == "user":
        missing = _observation("", old, new, "request")  # Phase 1's findings in the first message may name one
        if missing.cause == "missing_module":
            return missing
        return Divergence("request", "the request sent to the model differs from the recording's (the request, the model, "
                                     "or the scaffold generated here)" + _lines_apart(old.get("text"), new.get("text")))
    return Divergence("reply", "the model's recorded reply was sent back changed (another version of this package?)")


def beyond(held: int) -> Divergence:
    return Divergence("beyond", f"this machine needed more model turns than the recording holds ({held}): what it observed "
                                "led the run somewhere the recording did not go")


PEOPLE = frozenset({"card", "terminal"})  # who decided, when a person did (the event's ``by``)


def decision_diverged(call_id: str, name: str, by: str, denied: bool) -> ReplayDiverged:
    """A decision this run made that the recording did not: the cause is the decision, never this machine."""
    who = "you" if by in PEOPLE else (f"the {by} approver" if by else "the host")
    verb, other = ("denied", "approved") if denied else ("approved", "denied")
    words = (f"{who} {verb} {call_id} ({name}), which was {other} when this run was recorded; a recording can only "
             "follow the decisions it was recorded with; run with --approve all or a live model to explore other answers")
    return ReplayDiverged(ErrorCode.REPLAY_DIVERGED, f"the replay stops here: {words}",
                          {"cause": "decision", "call_id": call_id, "denied": denied, "by": by})


def _observation(lead: str, old: dict[str, Any], new: dict[str, Any], cause: str) -> Divergence:
    before, after = _text(old), _text(new)
    added = _only_in(after, before)
    modules = sorted({name.split(".")[0] for line in added for m in _MISSING_MODULE.finditer(line)
                      for name in next(g for g in m.groups() if g).split(", ")})
    if modules:
        names = ", ".join(modules)
        verb, it = ("is", "it") if len(modules) == 1 else ("are", "them")
        return Divergence("missing_module", f"the app could not start here: {names} {verb} missing on this machine "
                                            f"(the recording's machine had {it}); seen here: {_clip(added[0])}")
    if old.get("is_error") is not None and old.get("is_error") != new.get("is_error"):
        lead += f" (it {'failed' if new.get('is_error') else 'succeeded'} here, not in the recording)"
    return Divergence(cause, lead + _lines_apart(before, after))


def _tools(old: list[Any], new: list[Any]) -> Divergence:
    here, there = _tool_names(new), _tool_names(old)
    more = [n for n in here if n not in there]
    fewer = [n for n in there if n not in here]
    if not more and not fewer:
        return Divergence("tools", "the tools offered here are described differently than in the recording "
                                   "(another version of this package)")
    parts = ([f"here also {', '.join(more)}"] if more else []) + ([f"not here {', '.join(fewer)}"] if fewer else [])
    return Divergence("tools", f"this run offers other tools than the recording's ({'; '.join(parts)}): another "
                               "setting such as shell tools, or another version of this package")


def _tool_names(tools: list[Any]) -> list[str]:
    return [str(t.get("name")) for t in tools if isinstance(t, dict)]


def _message(record: dict[str, Any], index: int) -> dict[str, Any]:
    messages = record.get("messages") or []
    return messages[index] if index < len(messages) and isinstance(messages[index], dict) else {}


def _text(message: dict[str, Any]) -> str:
    return str(message.get("content", message.get("text", "")) or "")


def _lines(text: Any) -> list[str]:
    """Non-empty lines, without a list's leading ``- `` (a finding in a repair prompt is one)."""
    return [line.strip().removeprefix("- ") for line in str(text or "").splitlines() if line.strip()]


def _only_in(text: str, other: str) -> list[str]:
    known = set(_lines(other))
    return [line for line in _lines(text) if line not in known]


def _lines_apart(old: Any, new: Any) -> str:
    """``: here "..."; recorded "..."``, the first line each has that the other has not."""
    here, there = _only_in(str(new or ""), str(old or "")), _only_in(str(old or ""), str(new or ""))
    parts = ([f"here {_clip(here[0])}"] if here else []) + ([f"recorded {_clip(there[0])}"] if there else [])
    return (": " + "; ".join(parts)) if parts else ""


def _clip(line: str) -> str:
    line = " ".join(line.split())
    return repr(line if len(line) <= _LINE_CHARS else line[: _LINE_CHARS - 3] + "...")
