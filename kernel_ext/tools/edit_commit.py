"""Committing a planned edit: whole-file gates, atomic publish, evidence, knowledge.

Every editor builds an ``EditPlan`` (what the file was, what it becomes, which lines changed)
in both ``prepare`` and ``run``; ``run`` builds it again under the file's lock from a fresh
read, so an approval granted on one version never writes over another. ``commit`` then runs
the gates that need the complete new file (Python syntax regression, the import guard of the
ORM and schema modules), publishes with the identity read at planning time, and records the
write as evidence.

``counted`` wraps the editors' ``prepare``/``run``: refusals are counted per file, and from
the second one the refusal carries the explicit recovery sequence.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from kernel_ext import pyparse
from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.tools import pysyntax
from kernel_ext.tools.base import ToolContext
from kernel_ext.tools.evidence import (
    RECOVERY_AFTER,
    WriteRecord,
    evidence_log,
    recovery_steps,
    rejections,
)
from kernel_ext.tools.files_common import Loaded, split_lines, workspace_of
from kernel_ext.tools.import_guard import checker_for_root, guard_import, is_guarded
from kernel_ext.tools.read_ids import read_store
from kernel_ext.tools.written_lines import generated_digest, written_lines
from kernel_ext.workspace import Location, publish, sha256_hex
from kernel_ext.workspace.locks import lock_key

PYTHON_SUFFIXES = (".py", ".pyi")
_NOT_COUNTED = frozenset(
    {ErrorCode.FILE_BUSY, ErrorCode.CHECKER_UNAVAILABLE, ErrorCode.EXECUTION_FAILED, ErrorCode.INTERNAL_ERROR, ErrorCode.TIMEOUT}
)


@dataclass
class EditPlan:
    """One edit, fully computed but not yet written."""

    tool: str
    loc: Location
    before: Loaded | None  # None: the file is created
    new_text: str
    changed: tuple[tuple[int, int], ...]
    hint: tuple[int, int, int] | None = None  # (first, last, count) for the syntax shortcut
    fingerprint: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def old_lines(self) -> list[str]:
        """The file's lines before the edit (none when it is created)."""
        return self.before.lines if self.before is not None else []

    @cached_property
    def new_lines(self) -> list[str]:
        return split_lines(self.new_text)

    @cached_property
    def new_data(self) -> bytes:
        return self.new_text.encode("utf-8")

    @cached_property
    def new_sha(self) -> str:
        return sha256_hex(self.new_data)


def check_python(plan: EditPlan) -> None:
    """``syntax_error`` when a Python file that compiled (or did not exist) no longer does."""
    if not plan.loc.name.endswith(PYTHON_SUFFIXES):
        return
    try:
        pyparse.check_size(plan.new_data, plan.loc.display)
    except pyparse.TooLarge as exc:
        raise ToolFailure(
            ErrorCode.TOO_LARGE,
            f"{plan.loc.display!r} would be {exc.size} bytes of Python, more than the {exc.limit} the host parses "
            "to check its syntax. Nothing was written",
            {"reason": exc.code},
        ) from None
    if plan.before is None:
        error = pysyntax.compiles(plan.new_text, plan.loc.display)
    else:
        error = pysyntax.regression(
            plan.before.lines,
            plan.new_lines,
            plan.loc.display,
            old_sha=plan.before.sha256,
            new_sha=plan.new_sha,
            edit=plan.hint,
        )
    if error:
        raise ToolFailure(
            ErrorCode.SYNTAX_ERROR,
            f"this edit would break the Python syntax of {plan.loc.display!r}: {error}. Nothing was written",
            {"syntax_error": error},
        )


@dataclass(frozen=True)
class Committed:
    record: WriteRecord
    note: str = ""


def commit(ctx: ToolContext, plan: EditPlan) -> Committed:
    """Gate, publish and record ``plan``. The caller holds the file's lock."""
    ws = workspace_of(ctx)
    check_python(plan)
    note = ""
    if is_guarded(plan.loc.name):
        checker = ctx.services.get("import_checker") or checker_for_root(str(plan.loc.root))
        filename = str(plan.loc.root.joinpath(*plan.loc.parts))
        note = guard_import(checker, plan.loc.display, filename, plan.new_text, plan.before.text if plan.before else None)
    publish(ws, plan.loc, plan.new_data, expected=plan.before.identity if plan.before else None)
    before_sha = plan.before.sha256 if plan.before else ""
    record = evidence_log(ctx.state).record(
        plan.tool, plan.loc.display, plan.new_sha, before_sha, plan.changed, fingerprint=plan.fingerprint
    )
    written_lines(ctx.state).track(plan.loc.display, before_sha, plan.before.text if plan.before else None, plan.new_sha,
                                   generated=generated_digest(ctx.state, plan.loc.display))
    store, key = read_store(ctx.state), lock_key(plan.loc)
    if plan.tool == "write_file" or (before_sha and store.known_version(key) == before_sha):
        store.learn(key, plan.new_sha)
    rejections(ctx.state).pop(plan.loc.display, None)
    return Committed(record, note)


def counted(fn: Callable[[Any, ToolContext], Any]) -> Callable[[Any, ToolContext], Any]:
    """Count an editor's refusals per file; from the second, attach the recovery sequence."""

    @functools.wraps(fn)
    def wrapper(args: Any, ctx: ToolContext) -> Any:
        try:
            return fn(args, ctx)
        except ToolFailure as exc:
            if exc.code in _NOT_COUNTED:
                raise
            path = _display(ctx, getattr(args, "path", ""))
            counter = rejections(ctx.state)
            counter[path] += 1
            if counter[path] < RECOVERY_AFTER:
                raise
            steps = recovery_steps(path)
            data = {**exc.data, "rejections": counter[path], "recovery": steps}
            message = (
                f"{exc.message}\n{counter[path]} edits of {path!r} were refused in this run. Recover with: "
                f"1) {steps[0]}; 2) {steps[1]}"
            )
            raise ToolFailure(exc.code, message, data) from None

    return wrapper


def _display(ctx: ToolContext, path: str) -> str:
    try:
        return workspace_of(ctx).locate(path).display
    except ToolFailure:
        return path
