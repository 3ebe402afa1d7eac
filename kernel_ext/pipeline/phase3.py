"""Phase 3: validate, repair blockers in bounded rounds, keep the best tree, never regress.

The tree before Phase 3 is the first snapshot, so a failed repair never costs Phase 2's work.
Each round gives the repairer (fix turns of the LLM) the blockers only; the tree is validated
again and ranked by (app boots) then (entities it cannot create) then (actions it cannot run)
then (blocker count). Every strictly better tree is snapshotted. The loop stops when blockers
reach zero, after two rounds in a row without progress, after three rounds that changed the
tree without improving it, when the round budget is spent, or when ``should_continue`` says
so. A tree that ends worse than the best is rolled back to the best snapshot. Snapshots and
digests read the whole tree, so they run in a worker thread, never on the event loop. A
snapshot past the operator's budget (``tree_too_large``: sparse files, many hard links, a huge
tree) is not taken: a warning finding names why and Phase 3 goes on; rollback then uses the
best snapshot that was taken, or is not possible (said in a second finding).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.findings import Finding, ValidationReport
from kernel_ext.pipeline import snapshots

__all__ = ["Finding", "Phase3Result", "RoundOutcome", "ValidationReport", "run_phase3"]

NO_PROGRESS_ROUNDS = 2
PLATEAU_ROUNDS = 3
MIN_ROUNDS = 5


@dataclass(frozen=True)
class RoundOutcome:
    """What the repairer says it did besides editing files (which Phase 3 measures itself)."""

    obligations_changed: bool = False  # checklist evidence or API scenarios changed
    note: str = ""


@dataclass
class Phase3Result:
    report: ValidationReport
    rounds: int = 0
    rolled_back: bool = False
    stop_reason: str = ""
    history: list[tuple[int, tuple[int, int, int, int], bool]] = field(default_factory=list)


Validate = Callable[[], Awaitable[ValidationReport]]
Repair = Callable[[ValidationReport, int], Awaitable[RoundOutcome]]
Emit = Callable[..., Any]


async def run_phase3(
    app_dir: Path,
    snapshots_dir: Path,
    validate: Validate,
    repair: Repair | None,
    *,
    turns_left: int = 0,
    should_continue: Callable[[], bool] = lambda: True,
    emit: Emit | None = None,
    rounds: int | None = None,
    rounds_cap: int | None = None,
) -> Phase3Result:
    """Validate, then repair in rounds: ``rounds`` of them when given (0: repair off), else at least
    ``MIN_ROUNDS`` and up to ``turns_left``; never more than the operator's ``rounds_cap``."""
    emit = emit or (lambda *a, **k: None)
    report = await validate()
    best_report = report
    best = await _snapshot(app_dir, snapshots_dir, "phase3-start", emit)
    kept_report = best_report  # the report of the tree ``best`` holds
    if best is not None:
        emit("snapshot", snapshot_id=best.snapshot_id, reason="the tree before Phase 3", rank=list(report.rank()), skipped=best.skipped)
    result = Phase3Result(report)
    max_rounds = rounds if rounds is not None else max(MIN_ROUNDS, turns_left)
    if rounds_cap is not None:
        max_rounds = min(max_rounds, rounds_cap)
    no_progress = plateau = 0

    while True:
        if not report.blockers:
            result.stop_reason = "no blockers left"
            break
        if max_rounds == 0:
            result.stop_reason = "repair is off for this run (auto_fix off, or 0 repair rounds)"
            break
        if repair is None:
            result.stop_reason = "no provider to repair with"
            break
        if result.rounds >= max_rounds:
            result.stop_reason = f"round budget ({max_rounds}) spent"
            break
        if not should_continue():
            result.stop_reason = "run budget spent"
            break
        result.rounds += 1
        before = await asyncio.to_thread(snapshots.tree_digest, app_dir)
        outcome = await repair(report, result.rounds)
        changed = await asyncio.to_thread(snapshots.tree_digest, app_dir) != before
        report = await validate()
        improved = report.rank() < best_report.rank()
        result.history.append((result.rounds, report.rank(), changed))
        if improved:
            best_report = report
            taken = await _snapshot(app_dir, snapshots_dir, f"phase3-round-{result.rounds}", emit)
            if taken is not None:
                best, kept_report = taken, report
                emit("snapshot", snapshot_id=best.snapshot_id, reason=f"round {result.rounds} improved the tree", rank=list(report.rank()),
                     skipped=best.skipped)
        no_progress = 0 if (improved or outcome.obligations_changed) else no_progress + 1
        plateau = plateau + 1 if (changed and not improved) else 0
        if no_progress >= NO_PROGRESS_ROUNDS:
            result.stop_reason = f"{NO_PROGRESS_ROUNDS} rounds in a row without progress"
            break
        if plateau >= PLATEAU_ROUNDS:
            result.stop_reason = f"{PLATEAU_ROUNDS} rounds changed the tree without improving it"
            break

    if best is not None and report.rank() > kept_report.rank():
        await asyncio.to_thread(snapshots.restore, best, app_dir)
        emit("snapshot", snapshot_id=best.snapshot_id, reason="the repair ended worse; back to the best tree",
             rank=list(kept_report.rank()), action="restored")
        report = kept_report
        result.rolled_back = True
    elif best is None and report.rank() > best_report.rank():
        emit("finding", severity="warning", source="phase3-snapshot",
             message="the repair ended worse than the best tree, but no snapshot of it could be taken: the tree is kept as it is")
    result.report = report
    return result


async def _snapshot(app_dir: Path, snapshots_dir: Path, snapshot_id: str, emit: Emit) -> snapshots.TreeSnapshot | None:
    """Take a snapshot off the event loop; None (and a named warning finding) when it is past the budget."""
    try:
        return await asyncio.to_thread(snapshots.take, app_dir, snapshots_dir, snapshot_id)
    except ToolFailure as exc:
        if exc.code != ErrorCode.TREE_TOO_LARGE:
            raise
        emit("finding", severity="warning", source="phase3-snapshot",
             message=f"snapshot {snapshot_id!r} not taken ({exc.code}): {exc.message}; Phase 3 goes on without it")
        return None
