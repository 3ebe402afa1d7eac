"""Chapter 5, runnable: four authored experiments on the host-owned boundary.

Each scenario builds disposable calculator files, drives the real ``Executor`` with authored
calls and an authored host approver (no live model), prints every observation, and returns
True only when the boundary behaved as the chapter says. Failure scenarios also check that
the requested fix did not happen.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kernel_ext.boundary import (
    ApprovalRequest,
    BoundaryEvent,
    ExecutionPolicy,
    Executor,
    ToolCall,
    ToolResult,
)
from kernel_ext.scenarios.calculator import BUG, CALCULATOR, FIX, TOOLS, write_fixture
from kernel_ext.tools.base import Category, ToolContext
from kernel_ext.tools.registry import ToolCatalog
from kernel_ext.workspace import Workspace

SCENARIOS = ("default", "policy-denied", "approval-denied", "stale-input")
HOST_CHANGE = "# edited by the host while the approval card was open\n"


@dataclass
class Outcome:
    name: str
    passed: bool
    results: list[ToolResult] = field(default_factory=list)
    checks: list[tuple[str, bool]] = field(default_factory=list)


def run(name: str, out: Callable[[str], None] = print) -> Outcome:
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; choose from {', '.join(SCENARIOS)}")
    with tempfile.TemporaryDirectory(prefix="besser-side-effects-") as tmp:
        root = Path(tmp)
        write_fixture(root)
        return _SCENARIO_FUNCS[name](root, out)


def _executor(root: Path, policy: ExecutionPolicy, approver, out) -> Executor:
    def observe(event: BoundaryEvent) -> None:
        label = {"approval_requested": "approval requested", "approval_resolved": "approval resolved", "dispatch": "dispatch"}
        extra = "" if event.approved is None else (" (granted)" if event.approved else " (denied)")
        out(f"  [host] {label[event.kind]}: {event.call_id} {event.name}{extra}")

    context = ToolContext(services={"workspace": Workspace(root)})
    return Executor(ToolCatalog(TOOLS), context, policy=policy, approver=approver, observer=observe)


def _call(executor: Executor, out, call_id: str, name: str, arguments: dict) -> ToolResult:
    out(f"> {call_id}: {name} {arguments}")
    result = executor.execute_sync(ToolCall(call_id, name, arguments))
    out(f"  observation: {result.observation}")
    return result


def _fix_call() -> dict:
    return {"path": CALCULATOR, "old": BUG, "new": FIX}


def _finish(name: str, results: list[ToolResult], checks: list[tuple[str, bool]], out) -> Outcome:
    for label, ok in checks:
        out(f"  check: {label}: {'yes' if ok else 'NO'}")
    passed = all(ok for _, ok in checks)
    out(f"scenario {name}: {'behaved as expected' if passed else 'DID NOT behave as expected'}")
    return Outcome(name, passed, results, checks)


def _default(root: Path, out) -> Outcome:
    out("scenario default: policy allows read, edit and test; an authored host approver grants each call")
    policy = ExecutionPolicy.allowing([Category.EDIT, Category.TEST])
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    ex = _executor(root, policy, approve, out)
    results = [
        _call(ex, out, "call-1", "read", {"path": CALCULATOR}),
        _call(ex, out, "call-2", "edit", _fix_call()),
        _call(ex, out, "call-3", "test", {}),
    ]
    text = (root / CALCULATOR).read_text()
    checks = [
        ("every call succeeded", all(r.ok for r in results)),
        ("the read ran without asking; edit and test were asked separately", [r.name for r in asked] == ["edit", "test"]),
        ("the test request snapshots both files",
         [f.path for f in asked[1].files] == [CALCULATOR, "test_calculator.py"] if len(asked) > 1 else False),
        ("the fix is on disk", FIX in text and BUG not in text),
    ]
    return _finish("default", results, checks, out)


def _policy_denied(root: Path, out) -> Outcome:
    out("scenario policy-denied: the default policy allows reading only")
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    before = (root / CALCULATOR).read_bytes()
    ex = _executor(root, ExecutionPolicy(), approve, out)
    results = [_call(ex, out, "call-1", "read", {"path": CALCULATOR}), _call(ex, out, "call-2", "edit", _fix_call())]
    checks = [
        ("the read succeeded", results[0].ok),
        ("the edit was refused with policy_denied", results[1].error is not None and results[1].error.code == "policy_denied"),
        ("the approver was never asked", not asked),
        ("the file is byte-for-byte unchanged", (root / CALCULATOR).read_bytes() == before),
    ]
    return _finish("policy-denied", results, checks, out)


def _approval_denied(root: Path, out) -> Outcome:
    out("scenario approval-denied: policy allows edit and test; the host approver denies")
    before = (root / CALCULATOR).read_bytes()
    ex = _executor(root, ExecutionPolicy.allowing([Category.EDIT, Category.TEST]), lambda request: False, out)
    results = [_call(ex, out, "call-1", "edit", _fix_call()), _call(ex, out, "call-2", "test", {})]
    checks = [
        ("the edit was refused with approval_denied", results[0].error is not None and results[0].error.code == "approval_denied"),
        ("the test was refused with approval_denied", results[1].error is not None and results[1].error.code == "approval_denied"),
        ("the denied fix did not happen", (root / CALCULATOR).read_bytes() == before),
    ]
    return _finish("approval-denied", results, checks, out)


def _stale_input(root: Path, out) -> Outcome:
    out("scenario stale-input: the host changes calculator.py while the approval is pending, then approves")
    path = root / CALCULATOR

    def change_then_approve(request: ApprovalRequest) -> bool:
        out("  [host] editing calculator.py while the card is open")
        path.write_text(HOST_CHANGE + path.read_text())
        return True

    ex = _executor(root, ExecutionPolicy.allowing([Category.EDIT]), change_then_approve, out)
    results = [_call(ex, out, "call-1", "edit", _fix_call())]
    text = path.read_text()
    checks = [
        ("the edit was refused with stale_input", results[0].error is not None and results[0].error.code == "stale_input"),
        ("the host's change was kept", text.startswith(HOST_CHANGE)),
        ("the approved fix was not applied over it", BUG in text and FIX not in text),
    ]
    return _finish("stale-input", results, checks, out)


_SCENARIO_FUNCS = {
    "default": _default,
    "policy-denied": _policy_denied,
    "approval-denied": _approval_denied,
    "stale-input": _stale_input,
}
