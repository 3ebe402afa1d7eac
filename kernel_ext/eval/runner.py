"""Run one task through the real pipeline with a given provider, then verify what it produced.

``run_task`` calls ``pipeline.generation.generate`` (the same entry as ``kernel_ext.generate``):
Phase 1 with BESSER's generator, Phase 2 with the provider through the boundary (cards answered
by ``approve="all"``, a labelled policy), Phase 3's validation. Then the task's verifier checks the
produced tree with the verifier's own app host. The run's metrics (turns, tool calls by tool,
refusals by code, tokens, cost, wall time, Phase 3 repair rounds) are read from its event log:
they describe the run and never decide the verdict.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_ext.eval.verify import Produced, VerifierReport, verify

if TYPE_CHECKING:
    from kernel_ext.eval.tasks.base import Task
    from kernel_ext.hosting.run import Run
    from kernel_ext.providers.base import Provider
    from kernel_ext.validation.apphost.host import AppHost

RUN_TIMEOUT_S = 600.0


@dataclass
class RunMetrics:
    status: str = ""
    turns: int = 0
    tool_calls: dict[str, int] = field(default_factory=dict)
    refusals: dict[str, int] = field(default_factory=dict)  # tool results that failed, by error code
    recovered: dict[str, int] = field(default_factory=dict)  # of those, followed by a success of the same tool
    approvals: dict[str, int] = field(default_factory=dict)  # cards by outcome and who answered ("approved by policy")
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0
    repair_rounds: int = 0
    phase2: str = ""  # how the customize phase ended, as the host recorded it ("skipped: nothing to customise")
    error: str = ""  # the run's ending error, "CODE: message" (an unreachable endpoint, a refused key), if any

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TaskOutcome:
    task_id: str
    provider_label: str
    report: VerifierReport
    metrics: RunMetrics
    run_dir: Path

    @property
    def passed(self) -> bool:
        return self.report.passed

    def as_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "provider": self.provider_label, "passed": self.passed,
                "report": self.report.as_dict(), "metrics": self.metrics.as_dict(), "run_dir": str(self.run_dir)}


@contextmanager
def verifier_host() -> Iterator[AppHost]:
    """The verifier's own sandboxed app host (not the run's), closed on exit; one can serve many tasks."""
    from kernel_ext.validation.apphost.host import AppHost

    host = AppHost()
    try:
        yield host
    finally:
        host.close()


async def run_task_async(task: Task, provider: Provider | None, run_dir: Path, host: AppHost,
                         *, timeout: float = RUN_TIMEOUT_S, shell: bool | None = None) -> TaskOutcome:
    """Run ``task`` with ``provider`` into ``run_dir`` (a fresh folder), then verify it with ``host``.
    ``shell``: the run's shell tools on or off (None: the operator's environment decides)."""
    from kernel_ext.eval.models import eval_model
    from kernel_ext.pipeline.generation import generate

    started = time.monotonic()
    run = generate(eval_model(task.model).load(), task.request, run_dir=run_dir,
                   provider=provider if provider is not None else "none", target=task.target, approve="all",
                   allow_shell_tools=shell)
    done = await asyncio.wait_for(run.wait(), timeout)
    metrics = run_metrics(run, time.monotonic() - started)
    status = str(getattr(done, "status", "") or "")
    produced = Produced(run_dir, host, task.model, status)
    report = await asyncio.to_thread(verify, task.id, task.all_checks(), produced)
    label = provider.label if provider is not None else "none"
    return TaskOutcome(task.id, label, report, metrics, run_dir)


def run_task(task: Task, provider: Provider | None, run_dir: Path, host: AppHost | None = None) -> TaskOutcome:
    """``run_task_async`` from synchronous code (its own event loop; its own verifier host if none is given)."""
    if host is not None:
        return asyncio.run(run_task_async(task, provider, run_dir, host))
    with verifier_host() as own:
        return asyncio.run(run_task_async(task, provider, run_dir, own))


def run_metrics(run: Run, wall_s: float) -> RunMetrics:
    """What the run's event log says about its cost and shape."""
    metrics = RunMetrics(wall_s=round(wall_s, 3))
    calls: Counter[str] = Counter()
    refusals: Counter[str] = Counter()
    recovered: Counter[str] = Counter()
    approvals: Counter[str] = Counter()
    open_refusals: dict[str, list[str]] = {}  # tool -> codes of its refusals not yet followed by a success
    for event in run.events.events:
        kind = event.type
        if kind == "tool_call":
            calls[str(getattr(event, "name", ""))] += 1
        elif kind == "tool_result" and not getattr(event, "ok", True):
            code = str(getattr(event, "error_code", None) or "unknown")
            refusals[code] += 1
            open_refusals.setdefault(str(getattr(event, "name", "")), []).append(code)
        elif kind == "tool_result":
            recovered.update(open_refusals.pop(str(getattr(event, "name", "")), []))
        elif kind == "approval_resolved":
            approvals[f"{'approved' if getattr(event, 'approved', False) else 'denied'} by {getattr(event, 'by', 'host')}"] += 1
        elif kind == "cost":
            metrics.turns = max(metrics.turns, int(getattr(event, "turns", 0)))
            metrics.input_tokens = int(getattr(event, "input_tokens", 0))
            metrics.output_tokens = int(getattr(event, "output_tokens", 0))
            metrics.cost_usd = float(getattr(event, "cost_usd", 0.0))
        elif kind == "phase" and getattr(event, "status", "") != "started":
            if getattr(event, "phase", "") == "validate":
                metrics.repair_rounds = int((getattr(event, "details", {}) or {}).get("rounds", 0))
            elif getattr(event, "phase", "") == "customize":
                metrics.phase2 = f"{getattr(event, 'status', '')}: {getattr(event, 'message', '')}"
        elif kind == "error" and getattr(event, "terminal", False):
            metrics.error = f"{getattr(event, 'code', '')}: {getattr(event, 'message', '')}"
        elif kind == "done":
            metrics.status = str(getattr(event, "status", ""))
    metrics.tool_calls, metrics.refusals = dict(calls), dict(refusals)
    metrics.recovered, metrics.approvals = dict(recovered), dict(approvals)
    return metrics
