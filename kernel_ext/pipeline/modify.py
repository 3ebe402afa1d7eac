"""Modify runs: a new request on an earlier run continues from its files and task history.

Same model: the base run's ``app/`` is copied into the new run (no regeneration), its
generator manifest carries the authorship split over, and its tasks come back with their
outcomes. Changed model: Phase 1 regenerates a fresh scaffold, and the task list names what
the model change requires (classes and attributes added or removed) plus the base run's
work that is still open.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.hosting.layout import RUN_ID_PATTERN
from kernel_ext.pipeline.snapshots import SKIPPED
from kernel_ext.tools.task_list import TaskList
from kernel_ext.workspace import treewalk
from kernel_ext.workspace.treecopy import CopyStats, sync_tree


@dataclass
class BaseRun:
    run_id: str
    run_dir: Path
    recipe: dict[str, Any]

    @property
    def generated(self) -> dict[str, str]:
        return dict(self.recipe.get("generated") or {})

    @property
    def tasks(self) -> list[dict[str, Any]]:
        return list(self.recipe.get("tasks") or [])

    @property
    def model_digest(self) -> str:
        return str((self.recipe.get("model") or {}).get("digest", ""))


MAX_RECIPE_BYTES = 64 * 1024 * 1024  # what an export reads of a run.json (hosting/export/record.py)


def find_base_run(runs_dir: Path, run_id: str) -> BaseRun:
    """The earlier run a modify run continues; read from a file: call it off the event loop."""
    if not RUN_ID_PATTERN.fullmatch(run_id or ""):
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"{run_id!r} is not a run id")
    from kernel_ext import safejson
    from kernel_ext.workspace import named

    try:  # held like a file a request names: under the runs folder, no link, regular, bounded
        data = named.read(f"{run_id}/run.json", runs_dir, what="base run record", max_bytes=MAX_RECIPE_BYTES)
        recipe = safejson.loads(data)
    except ToolFailure as exc:
        if exc.code != ErrorCode.NOT_FOUND:
            raise
        raise ToolFailure(ErrorCode.NOT_FOUND, f"run {run_id!r} has no run.json to continue from (did it finish?)") from None
    except ValueError:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"run {run_id!r}: its run.json is not readable JSON") from None
    if not isinstance(recipe, dict):
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"run {run_id!r}: its run.json is not a JSON object")
    return BaseRun(run_id, runs_dir / run_id, recipe)


def copy_app(base: BaseRun, app_dir: Path) -> int:
    """Copy the base run's app into ``app_dir`` (links as links, internal folders skipped, FIFOs and
    devices never opened), through descriptors; returns the files and links copied."""
    try:
        src = _open_app(base)
    except OSError:
        raise ToolFailure(ErrorCode.NOT_FOUND, f"run {base.run_id!r} has no app folder") from None
    try:
        app_dir.mkdir(parents=True, exist_ok=True)
        stats = CopyStats()
        with treewalk.opened_dir(app_dir) as dst:
            sync_tree(src, dst, SKIPPED, stats)
        return stats.written
    finally:
        os.close(src)


def _open_app(base: BaseRun) -> int:
    """The base run's ``app`` folder, reached no-follow from the runs folder as its ``run.json`` was
    (``find_base_run``): a run folder swapped for a link after that read is refused here, never
    followed (red team 2, F7). The runs folder itself is the operator's, opened as named."""
    runs = os.open(base.run_dir.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with treewalk.opened_dir(base.run_id, runs) as run:
            return treewalk.open_dir("app", run)
    finally:
        os.close(runs)


@dataclass
class ModelChange:
    added_classes: list[str] = field(default_factory=list)
    removed_classes: list[str] = field(default_factory=list)
    added_attributes: list[str] = field(default_factory=list)
    removed_attributes: list[str] = field(default_factory=list)

    def tasks(self) -> list[str]:
        out = [f"Support the new class {name} (create, read, update, delete)" for name in self.added_classes]
        out += [f"Remove what remains of the deleted class {name}" for name in self.removed_classes]
        out += [f"Handle the new attribute {name} wherever its class is customised" for name in self.added_attributes]
        out += [f"Drop uses of the removed attribute {name}" for name in self.removed_attributes]
        return out


def model_change(before: dict[str, Any], after: dict[str, Any]) -> ModelChange:
    """Classes and attributes added or removed between two canonical model forms."""
    old, new = _shape(before), _shape(after)
    change = ModelChange(sorted(set(new) - set(old)), sorted(set(old) - set(new)))
    for name in sorted(set(old) & set(new)):
        change.added_attributes += [f"{name}.{a}" for a in sorted(new[name] - old[name])]
        change.removed_attributes += [f"{name}.{a}" for a in sorted(old[name] - new[name])]
    return change


def _shape(form: dict[str, Any]) -> dict[str, set[str]]:
    return {c["name"]: {a["name"] for a in c.get("attributes", [])} for c in form.get("classes", [])}


def carry_tasks(tasks: TaskList, base: BaseRun, change: ModelChange | None) -> None:
    """A modify run keeps the base run's tasks (closed ones stay closed) and names the model change."""
    for old in base.tasks:
        if old.get("status") == "dropped" or (change is not None and old.get("status") != "open"):
            continue  # after a model change the fresh scaffold holds none of the old work but the open tasks
        task = tasks.add(str(old.get("text", "")), origin=old.get("origin", "request"))
        task.status, task.reason, task.evidence = old.get("status", "open"), old.get("reason", ""), old.get("evidence", [])
    if change is not None:
        for text in change.tasks():
            tasks.add(text, origin="request")
        tasks.add(f"Re-apply the customisations of run {base.run_id} that the request still needs", origin="request")
