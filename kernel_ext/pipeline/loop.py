"""Phase 2: the tool loop. The provider proposes; every call crosses the Executor.

Each turn: check the budgets, keep the context inside its budget, ask the provider, record
its text and cost, then take its tool calls one by one (a call cut off by the output limit or
an edit of a file churning without progress is refused here, before the boundary); a turn with
several writes is then checked once, together (``batch_check``), before its results go back. A reply
without tool calls is the model saying it is finished: accepted only when no task is open
and no retained API scenario fails; otherwise it is told what is open, a bounded number of
times. A replay that diverged from its recording (``ReplayDiverged``) is not absorbed here:
it ends the whole run, since no later request could be replayed either; that includes a
decision on a card the recording made the other way, caught before the turn's next call runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from kernel_ext.boundary import Executor, ToolResult
from kernel_ext.hosting.bus import EventLog
from kernel_ext.hosting.events import ApprovalResolved
from kernel_ext.pipeline.batch_check import SHOWN, check_batch, is_batch, with_findings, written_paths, wrote
from kernel_ext.pipeline.guards import Budgets, EditChurn, condense_context, truncated_call, victory_refusal
from kernel_ext.pipeline.reporting import report_call, report_result
from kernel_ext.pipeline.streaming import TextStream
from kernel_ext.providers.base import Provider
from kernel_ext.providers.divergence import ReplayDiverged, decision_diverged
from kernel_ext.providers.events import ProviderError
from kernel_ext.providers.messages import Conversation, ToolUse, admit, summarise
from kernel_ext.providers.quota import budget_fields
from kernel_ext.tools.task_list import TaskList

MAX_VICTORY_REFUSALS = 3
CONTEXT_BUDGET_TOKENS = 60_000
EVENT_TEXT_CHARS = 16_000  # a model's text as the timeline shows it
# a spent budget ends the loop; Phase 3 still runs (with no further call once the endpoint's own
# budget is exhausted: the provider refuses them without a request)
BUDGET_CODES = frozenset({"COST_CAP", "BUDGET", "BUDGET_EXHAUSTED"})


@dataclass(frozen=True)
class LoopResult:
    stop: str  # "finished" | "budget" | "budget_exhausted" | "cancelled" | "provider_error" | "unfinished"
    reason: str = ""
    turns: int = 0


@dataclass
class LoopGuards:
    budgets: Budgets
    churn: EditChurn
    context_budget_tokens: int = CONTEXT_BUDGET_TOKENS
    max_victory_refusals: int = MAX_VICTORY_REFUSALS


async def customize(
    provider: Provider,
    conversation: Conversation,
    executor: Executor,
    events: EventLog,
    tasks: TaskList,
    guards: LoopGuards,
    *,
    failing_scenarios: Callable[[], list[str]] = lambda: [],
    cancel: asyncio.Event | None = None,
) -> LoopResult:
    refusals = 0
    budgets = guards.budgets
    while True:
        spent = budgets.spent()
        if spent:
            events.emit("error", code="BUDGET", message=spent, terminal=False)
            return LoopResult("budget", spent, budgets.turns)
        if condense_context(conversation, guards.context_budget_tokens):
            events.emit("text", text="[host] older tool results were condensed to stay within the context budget")
        stream = TextStream(events, f"r{budgets.turns + 1}")
        try:
            reply = await provider.complete(conversation, executor.offered, cancel=cancel, budget=budgets.call_budget(),
                                            on_text=stream.add)
        except ReplayDiverged:
            raise  # nothing after the difference can be replayed: the run ends (the orchestrator says so once)
        except ProviderError as exc:
            code = str(exc.code).upper()
            budget = code in BUDGET_CODES
            budgets.cost_usd = provider.meter.cost_usd
            _emit_cost(events, provider, budgets)  # what the cut-off call spent, and any usage it refused
            events.emit("error", code=code, message=exc.message, terminal=not budget, **budget_fields(exc.data))
            if code == "BUDGET_EXHAUSTED":
                budgets.exhausted = exc.message
                return LoopResult("budget_exhausted", exc.message, budgets.turns)
            return LoopResult("budget" if budget else "provider_error", exc.message, budgets.turns)
        budgets.turns += 1
        budgets.tokens += reply.usage.total_tokens
        budgets.cost_usd = provider.meter.cost_usd
        calls = admit(reply.tool_calls, executor.call_ids.mint)  # the host's ids; the endpoint's stay on the wire
        conversation.assistant(reply.text, calls)  # kept bounded: it is re-sent every turn
        if reply.text.strip():
            events.emit("text", text=summarise(reply.text, EVENT_TEXT_CHARS), stream=stream.final_id)
        _emit_cost(events, provider, budgets)

        if not calls:
            # a task blocked with a reason is answered for: the loop may end, and the run still ends blocked
            open_work = [f"{t.id} {t.text}" for t in tasks.open_tasks() if not (t.status == "blocked" and t.reason.strip())]
            refusal = victory_refusal(open_work, failing_scenarios())
            if refusal is None:
                return LoopResult("finished", "the model finished with no open work", budgets.turns)
            refusals += 1
            if refusals > guards.max_victory_refusals:
                return LoopResult("unfinished", refusal, budgets.turns)
            conversation.user(f"[host] {refusal}")
            events.emit("text", text=f"[host] {refusal}")
            continue

        results = []
        for index, call in enumerate(calls):
            results.append(await _take_call(call, reply.stop_reason, executor, events, tasks, guards.churn))
            await _follow_recorded_decision(provider, events, results[-1], index, len(calls))
        if is_batch(results):  # several writes: checked once, together, and said with this turn's results
            results = await _check_batch(executor, events, results)
        for result in results:
            conversation.add_result(result)


async def _take_call(
    call: ToolUse,
    stop_reason: str,
    executor: Executor,
    events: EventLog,
    tasks: TaskList,
    churn: EditChurn,
) -> ToolResult:
    arguments = call.parsed()
    tool_call = call.to_call()
    report_call(events, tool_call)
    refusal = truncated_call(call, stop_reason)
    code = "truncated_call"
    if refusal is None:
        refusal, code = churn.check(call.name, arguments), "edit_churn"
    if refusal is not None:
        result = ToolResult.failure(tool_call.id, call.name, code, refusal)
    else:
        before = (tasks.revision, _closed(tasks))
        result = await executor.execute(tool_call)
        churn.record(call.name, arguments, result.ok)
        if call.name == "task_list" and result.ok:
            if _closed(tasks) > before[1]:
                churn.progress()
            events.emit("task_list", tasks=tasks.outcomes())
    report_result(events, result)
    return result


async def _follow_recorded_decision(provider: Provider, events: EventLog, result: ToolResult, index: int, count: int) -> None:
    """A replay meeting a decision its recording did not make stops before the turn's next call runs
    (a cancel already on its way, the person quitting at the card, lands first: the run is cancelled)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        await asyncio.sleep(0)
    decided = next((e for e in reversed(events.of_type("approval_resolved"))
                    if isinstance(e, ApprovalResolved) and e.call_id == result.call_id), None)
    if decided is None:
        return
    recorded = provider.recorded_denial(index, count)
    denied = not decided.approved
    if recorded is not None and recorded != denied:
        raise decision_diverged(result.call_id, result.name, str(decided.by), denied)


async def _check_batch(executor: Executor, events: EventLog, results: list[ToolResult]) -> list[ToolResult]:
    """The batch check over the files the turn wrote; its verdict joins the turn's last write."""
    workspace = executor.context.workspace
    paths = written_paths(results)
    if workspace is None or not paths:
        return results
    findings = await asyncio.to_thread(check_batch, workspace, paths)  # reads files: off the loop
    for finding in findings[:SHOWN]:
        events.emit("finding", **finding.as_event())
    last = max(i for i, r in enumerate(results) if wrote(r))
    results[last] = with_findings(results[last], findings, len(paths))
    return results


def _closed(tasks: TaskList) -> int:
    return sum(1 for t in tasks.tasks.values() if t.status in ("verified", "implemented", "existing"))


def _emit_cost(events: EventLog, provider: Provider, budgets: Budgets) -> None:
    for problem in provider.meter.take_problems():  # an endpoint's unusable figures, counted as an estimate
        events.emit("error", code="USAGE_REFUSED", message=f"usage refused: {problem}; this call was counted "
                    "as an estimate from its size, and the totals went on from the last sane figure", terminal=False)
    for code, message in provider.meter.take_notices():  # e.g. the endpoint naming another model
        events.emit("error", code=code, message=message, terminal=False)
    usage = provider.meter.usage
    events.emit(
        "cost",
        input_tokens=usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
        output_tokens=usage.output_tokens,
        cost_usd=round(provider.meter.cost_usd, 6),
        turns=budgets.turns,
        elapsed_s=round(budgets.elapsed(), 3),
    )
