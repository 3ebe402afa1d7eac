"""Validation after a batch of writes: one syntax and import check once a model turn's writes are in.

Each edit is gated on its own (``tools/edit_commit``: a Python syntax regression or a broken
import of the ORM modules is refused before the write), but a turn that writes several files
can leave them inconsistent with each other: ``main.py`` importing a module no file and no
installed package provides, a JSON file that no longer parses. After a turn with two or more
successful writes, the files it wrote are checked once, together (syntax: Python, JSON, and
JavaScript where Node.js is installed; imports: each Python file's top-level imports against its
folder's modules, the standard library and this interpreter), and the findings go back to the
model with that turn's results: appended to the observation of the turn's last write, a count and
the first ``SHOWN`` of them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from kernel_ext.boundary import ToolResult
from kernel_ext.boundary.calls import bound
from kernel_ext.errors import ToolFailure
from kernel_ext.findings import Finding
from kernel_ext.workspace import Location, Workspace

WRITE_TOOLS = frozenset({"write_file", "modify_file", "replace_file_lines"})
MIN_BATCH = 2  # a single write was already checked by its own gates
SHOWN = 8
SOURCE = "batch-check"


def wrote(result: ToolResult) -> bool:
    """Did this result write a file (``already_applied`` wrote nothing)?"""
    return result.ok and result.name in WRITE_TOOLS and result.data.get("written") is True


def written_paths(results: Sequence[ToolResult]) -> list[str]:
    """The files a turn's writes left (each once, in order)."""
    paths: list[str] = []
    for result in results:
        path = result.data.get("path")
        if wrote(result) and isinstance(path, str) and path not in paths:
            paths.append(path)
    return paths


def is_batch(results: Sequence[ToolResult]) -> bool:
    return sum(1 for r in results if wrote(r)) >= MIN_BATCH


def check_batch(workspace: Workspace, paths: Sequence[str]) -> list[Finding]:
    """Syntax and import findings for the files a batch wrote (a file gone since is skipped)."""
    from kernel_ext.tools.syntax import check_text

    findings: list[Finding] = []
    for path in paths:
        try:
            loc = workspace.locate(path)
            text = workspace.read_text(loc)
        except ToolFailure:
            continue  # deleted or replaced later in the batch: nothing of it to check
        try:
            checker, error = check_text(text, loc.display)
        except ToolFailure:
            checker, error = "", ""  # no checker for this type here, or too large to parse: not checked
        if error:
            findings.append(Finding("blocker", SOURCE, f"syntax error in {loc.display} ({checker}): {error}", loc.display))
        elif loc.name.endswith(".py") and checker:
            findings += _imports(workspace, loc, text)
    return findings


def _imports(workspace: Workspace, loc: Location, text: str) -> list[Finding]:
    from kernel_ext.generation.checks import import_findings, requirement_names
    from kernel_ext.pyparse import parse_source

    try:
        tree = parse_source(text, filename=loc.display)
    except (SyntaxError, ValueError):
        return []
    siblings = _siblings(workspace, loc)
    requirements = b""
    if "requirements.txt" in siblings:
        try:
            requirements = workspace.read_bytes(workspace.locate(_beside(loc, "requirements.txt")))[0]
        except ToolFailure:
            pass
    local = {name[:-3] if name.endswith(".py") else name for name in siblings}
    return import_findings(loc.display, tree, local | set(sys.stdlib_module_names), set(), requirement_names(requirements),
                           source=SOURCE)


def _siblings(workspace: Workspace, loc: Location) -> set[str]:
    """The names in ``loc``'s folder (the modules a file run from there imports as local)."""
    try:
        with workspace.parent_dir(loc) as fd:
            return set(os.listdir(fd))
    except (OSError, ToolFailure):
        return set()


def _beside(loc: Location, name: str) -> str:
    folder = loc.display.rsplit("/", 1)[0] if "/" in loc.display else ""
    return f"{folder}/{name}" if folder else name


def with_findings(result: ToolResult, findings: Sequence[Finding], files: int) -> ToolResult:
    """``result`` with the batch check's verdict appended to what the model reads."""
    what = "the file this turn wrote twice or more" if files == 1 else f"the {files} files this turn wrote, together"
    if not findings:
        note = f"[host] checked {what}: no syntax or import problems"
    else:
        lines = [f"- [{f.severity}] {f.message}" + (f" (line {f.line})" if f.line else "") for f in findings[:SHOWN]]
        more = f"\n... and {len(findings) - SHOWN} more" if len(findings) > SHOWN else ""
        note = (f"[host] checked {what}: {len(findings)} findings\n"
                + "\n".join(lines) + more)
    return result.model_copy(update={"observation": bound(f"{result.observation}\n\n{note}")})
