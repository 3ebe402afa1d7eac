"""The chapter-5 calculator as a hosted run: the same calls, but a person answers the cards.

Used by the server, the magics and notebook 02: the run writes the fixture into its ``app/``
folder and proposes read -> edit (the fix) -> test through the real Executor, with the run's
``AsyncApprover`` deciding. The ``done`` status is earned: ``completed`` only when the fix is
on disk and the driver passed.
"""

from __future__ import annotations

from collections.abc import Iterable

from kernel_ext.boundary import ExecutionPolicy, Executor, ToolCall, ToolResult
from kernel_ext.hosting.options import OperatorSettings, ScenarioRequest
from kernel_ext.hosting.run import RunBody, RunContext
from kernel_ext.pipeline.reporting import boundary_observer, report_call, report_result
from kernel_ext.scenarios.calculator import BUG, CALCULATOR, FIX, TOOLS, write_fixture
from kernel_ext.tools.base import ToolContext
from kernel_ext.tools.registry import ToolCatalog
from kernel_ext.workspace import Workspace

PLAN: tuple[tuple[str, dict[str, str]], ...] = (
    ("read", {"path": CALCULATOR}),
    ("edit", {"path": CALCULATOR, "old": BUG, "new": FIX}),
    ("test", {}),
)


def side_effects_body(allowed: Iterable[str] = ("edit", "test"), request: str = "fix the calculator") -> RunBody:
    allowed = tuple(allowed)

    async def body(ctx: RunContext) -> None:
        events = ctx.events
        write_fixture(ctx.layout.app_dir)
        events.emit(
            "run_started",
            request=request,
            model_name="calculator",
            provider_label="scripted:chapter-5",
            provider_kind="scripted",
            run_dir=str(ctx.layout.run_dir),
        )
        events.emit("phase", phase="customize", status="started", message=f"policy allows read + {', '.join(allowed) or 'nothing else'}")
        executor = Executor(
            ToolCatalog(TOOLS),
            ToolContext(services={"workspace": Workspace(ctx.layout.app_dir)}),
            policy=ExecutionPolicy.allowing(allowed),
            approver=ctx.approver,
            observer=boundary_observer(events, ctx.approver),
            run_id=ctx.run_id,
            known_secrets=ctx.known_secrets,
        )
        results = []
        for number, (name, arguments) in enumerate(PLAN, 1):
            call = ToolCall(f"call-{number}", name, dict(arguments))
            report_call(events, call)
            result = await executor.execute(call)
            report_result(events, result)
            results.append(result)
        events.emit("phase", phase="customize", status="done")
        fixed = FIX in (ctx.layout.app_dir / CALCULATOR).read_text()
        passed = results[-1].ok
        blockers = [] if passed else [_why_not_passed(results[-1])]
        events.emit(
            "done",
            status="completed" if fixed and passed else "blocked",
            blockers=blockers,
            summary="; ".join(f"{r.name}: {'ok' if r.ok else r.error_code}" for r in results),
        )

    return body


# A refusal names what was refused and that it never ran; only a test that ran can have failed.
NOT_RUN = {
    "policy_denied": "the calculator test was denied by policy (it did not run)",
    "approval_denied": "the calculator test was denied (it did not run)",
    "stale_input": "the calculator test did not run: its files changed after the card was shown",
}


def _why_not_passed(result: ToolResult) -> str:
    code = result.error.code if result.error else None
    return f"{code}: {NOT_RUN.get(str(code), 'the calculator test failed')}"


def scenario_body(request: ScenarioRequest, operator: OperatorSettings) -> RunBody:
    """The body hosting starts for a ``scenario`` request (named in ``hosting/bodies.py``)."""
    return side_effects_body(allowed=tuple(request.allow))
