"""Scripted providers for the evaluation: the oracle, the null and the plausible wrong script.

All three are authored turns (``providers.scripted``, labelled ``scripted:<task>-<kind>``), not a
model. The oracle does the task correctly through the real tools; the null script answers
"done" with no tool call, every time it is asked; the wrong script does something a model
plausibly does instead (JWT added but the route left open, stock not reduced...). The verifier
must pass the first and fail the other two: that is what proves it discriminates.

These helpers keep the scripts short: ``plan`` is the gap phase's planning call, ``edit`` a
``modify_file`` call, ``write`` a ``write_file`` call, ``close`` the ``task_list`` call that marks
the planned tasks done with evidence quoted from the lines the run wrote.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from kernel_ext.providers.messages import ToolUse
from kernel_ext.providers.scripted import Script, ScriptedProvider, Turn, call

ScriptKind = Literal["oracle", "null", "wrong"]
KINDS: tuple[ScriptKind, ...] = ("oracle", "null", "wrong")
NULL_TURNS = 40  # more than any run asks of it: the gap call, the refused "done"s, repair rounds


def plan(*tasks: str) -> Turn:
    """The gap phase's planning call: the task list (empty: the scaffold already does it)."""
    return Turn("", (call("submit_tasks", {"tasks": list(tasks)}),))


def write(path: str, content: str) -> ToolUse:
    return call("write_file", {"path": path, "content": content})


def edit(path: str, old: str, new: str) -> ToolUse:
    return call("modify_file", {"path": path, "old_text": old, "new_text": new})


def read(path: str) -> ToolUse:
    return call("read_file", {"path": path})


def close(evidence: Sequence[tuple[str, str]], first: int = 1) -> Turn:
    """``task_list done`` for tasks T<first>.. in order, each citing (path, a quote of a line it wrote)."""
    ids = [f"T{first + i}" for i in range(len(evidence))]
    cited = [{"id": task_id, "path": path, "quote": quote} for task_id, (path, quote) in zip(ids, evidence, strict=True)]
    return Turn("Recording evidence for the checklist.", (call("task_list", {"action": "done", "ids": ids, "evidence": cited}),))


def turns(*steps: Turn | Sequence[ToolUse], end: str = "Done.") -> list[Turn]:
    """Steps (a Turn, or the calls of one turn) followed by the closing answer without a tool call."""
    out = [s if isinstance(s, Turn) else Turn("", tuple(s)) for s in steps]
    return [*out, Turn(end)]


def null_script(task_id: str) -> Script:
    """Answers "done" with no tool call, every time it is asked."""
    return Script.of(f"{task_id}-null", [Turn("done")] * NULL_TURNS)


def provider(script: Script) -> ScriptedProvider:
    return ScriptedProvider(script)


def wire(module: str, after: str) -> tuple[ToolUse, ToolUse]:
    """Two ``modify_file`` calls that import ``routers/<module>.py`` (or a top-level ``<module>.py``
    when it has no ``routers.`` prefix) into ``backend/main_api.py`` and include its router,
    each placed after the scaffold's own lines for router ``after``."""
    package, _, name = module.rpartition(".")
    importer = f"from {package} import {name} as {name}_router\n" if package else f"from {name} import router as {name}_router\n"
    include = f"app.include_router({name}_router.router)\n" if package else f"app.include_router({name}_router)\n"
    anchor_import = f"from routers import {after} as {after}_router\n"
    anchor_include = f"app.include_router({after}_router.router)\n"
    return (edit("backend/main_api.py", anchor_import, anchor_import + importer),
            edit("backend/main_api.py", anchor_include, anchor_include + include))
