"""The chapter-5 calculator fixture: a buggy module, its test driver, and three tools.

``read``, ``edit`` and ``test`` are authored fixture tools (not the agent's file tools): they
expose exactly ``calculator.py`` and run the driver with a fixed argument vector, so the
experiment shows the boundary's mechanics and nothing else.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import Field

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.textdiff import unified_diff
from kernel_ext.tools.base import Category, Preparation, ToolArgs, ToolContext, ToolOutcome, ToolSpec
from kernel_ext.workspace import publish, snapshot

CALCULATOR = "calculator.py"
DRIVER = "test_calculator.py"

BUGGY_CALCULATOR = '''"""A tiny calculator with one deliberate bug."""


def add(a, b):
    return a - b


def multiply(a, b):
    return a * b
'''

DRIVER_SOURCE = '''"""Exit 0 when the calculator is right, 1 with a message when it is not."""
import sys

from calculator import add, multiply

failures = []
if add(2, 3) != 5:
    failures.append(f"add(2, 3) returned {add(2, 3)}, expected 5")
if multiply(4, 5) != 20:
    failures.append(f"multiply(4, 5) returned {multiply(4, 5)}, expected 20")
print("\\n".join(failures) or "all calculator checks passed")
sys.exit(1 if failures else 0)
'''

BUG, FIX = "    return a - b\n", "    return a + b\n"


def write_fixture(root: Path) -> None:
    (root / CALCULATOR).write_text(BUGGY_CALCULATOR)
    (root / DRIVER).write_text(DRIVER_SOURCE)


class ReadArgs(ToolArgs):
    path: str = Field(description="Only calculator.py is exposed.")


class EditArgs(ToolArgs):
    path: str = Field(description="Only calculator.py is exposed.")
    old: str = Field(description="Exact text to replace; must occur exactly once.")
    new: str = Field(description="Replacement text.")


class TestArgs(ToolArgs):
    pass


def _only_calculator(path: str) -> None:
    if path != CALCULATOR:
        raise ToolFailure(ErrorCode.OUTSIDE_WORKSPACE, f"only {CALCULATOR} is exposed, not {path!r}")


def _read(args: ReadArgs, ctx: ToolContext) -> ToolOutcome:
    _only_calculator(args.path)
    return ToolOutcome(ctx.required_workspace().read_text(args.path), {"path": args.path})


def _prepare_edit(args: EditArgs, ctx: ToolContext) -> Preparation:
    _only_calculator(args.path)
    text = ctx.required_workspace().read_text(args.path)
    if not args.old or text.count(args.old) != 1:
        raise ToolFailure("no_unique_match", "old text must match exactly once")
    after = text.replace(args.old, args.new, 1)
    diff = unified_diff(args.path, text, after)
    return Preparation(files=(args.path,), proposal=diff)


def _edit(args: EditArgs, ctx: ToolContext) -> ToolOutcome:
    before = snapshot(ctx.required_workspace(), args.path)
    text = ctx.required_workspace().read_text(args.path)
    if text.count(args.old) != 1:
        raise ToolFailure(ErrorCode.STALE_INPUT, "old text no longer matches exactly once")
    publish(ctx.required_workspace(), args.path, text.replace(args.old, args.new, 1).encode(), expected=before.identity)
    return ToolOutcome(f"edited {args.path}", {"path": args.path})


def _prepare_test(args: TestArgs, ctx: ToolContext) -> Preparation:
    return Preparation(files=(CALCULATOR, DRIVER), proposal=f"{Path(sys.executable).name} {DRIVER}")


def _test(args: TestArgs, ctx: ToolContext) -> ToolOutcome:
    # A fixed argument vector, a working directory and a timeout, in a one-off sandbox: the
    # driver imports calculator.py, which the model edits, so it runs confined like any check.
    from kernel_ext.sandbox import run_confined

    record = run_confined([sys.executable, "-B", DRIVER], ctx.required_workspace().root, 30, network=False,
                          env={"PYTHONDONTWRITEBYTECODE": "1"}, spill_output=False, label=f"python {DRIVER}")
    if record.timed_out:
        raise ToolFailure(ErrorCode.TIMEOUT, f"{DRIVER} did not finish within 30 s")
    output = (record.stdout.text + record.stderr.text).strip()
    if record.exit_code != 0:
        raise ToolFailure("tests_failed", f"exit {record.exit_code}: {output}", {"exit_code": record.exit_code})
    return ToolOutcome(f"exit 0: {output}", {"exit_code": 0})


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="read",
        category=Category.READ,
        args_model=ReadArgs,
        description="Read calculator.py.",
        run=_read,
        requires=frozenset({"workspace"}),
    ),
    ToolSpec(
        name="edit",
        category=Category.EDIT,
        args_model=EditArgs,
        description="Replace text in calculator.py.",
        run=_edit,
        prepare=_prepare_edit,
        requires=frozenset({"workspace"}),
    ),
    ToolSpec(
        name="test",
        category=Category.TEST,
        args_model=TestArgs,
        description="Run the calculator test driver.",
        run=_test,
        prepare=_prepare_test,
        requires=frozenset({"workspace"}),
        blocking=True,
    ),
)
