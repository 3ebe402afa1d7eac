"""The three-phase run: select -> generate -> gap -> customize -> validate, then ``done``.

The orchestrator owns phases, budgets, guards, snapshots and events; every tool call it
lets the model make crosses the Executor. Without a provider, Phase 1 and Phase 3 still run
for real and Phase 2 says plainly that no provider is configured.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from kernel_ext.boundary import ExecutionPolicy, Executor
from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.findings import Finding, ValidationReport
from kernel_ext.hosting.options import OperatorSettings, RunRequest, run_switches
from kernel_ext.hosting.run import RunContext
from kernel_ext.pipeline import phase3, planner, prompts
from kernel_ext.pipeline.approve_mode import ModeApprover
from kernel_ext.pipeline.guards import Budgets, EditChurn
from kernel_ext.pipeline.intent import frontend_intent
from kernel_ext.pipeline.loop import LoopGuards, budget_fields, customize
from kernel_ext.pipeline.modify import BaseRun, ModelChange, find_base_run
from kernel_ext.pipeline.recipe import frontend_files, write_recipe
from kernel_ext.pipeline.reporting import boundary_observer
from kernel_ext.pipeline.run_shell import active_tier, shell_for_run, write_probe
from kernel_ext.providers.base import Provider
from kernel_ext.providers.messages import Conversation
from kernel_ext.safetext import plural
from kernel_ext.tools.base import Category, ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.tools.task_list import SERVICE as TASKS
from kernel_ext.tools.task_list import TaskList
from kernel_ext.workspace import Workspace

if TYPE_CHECKING:
    from besser.BUML.metamodel.structural import DomainModel

    from kernel_ext.generation.phase1 import Phase1Result

REPAIR_TURNS_PER_ROUND = 6


@dataclass(frozen=True)
class PhaseOutcome:
    """How a phase ended, for its ``phase`` event."""

    status: str = "done"  # "done" | "skipped" | "failed"
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)


class Orchestrator:
    def __init__(self, ctx: RunContext, request: RunRequest, operator: OperatorSettings, model: DomainModel,
                 provider: Provider | None = None):
        self.ctx, self.request, self.operator = ctx, request, operator
        self.model, self.provider = model, provider
        if provider is not None:  # its key joins the run's secrets: redacted in events, refused in calls
            ctx.add_secrets(provider.secrets())
        self.events = ctx.events
        self.tasks = TaskList()
        self.timer: dict[str, float] = {}
        self.budgets = Budgets(request.max_turns, max_cost_usd=request.max_cost_usd, max_runtime_s=request.max_runtime_s)
        self.switches = run_switches(request, operator)  # repair, runtime probes, runbook: the request within the operator's
        self.workspace = Workspace(ctx.layout.app_dir, operator.extra_roots)  # the fence's defaults: workspace/internal.py
        self.tool_context = self._tool_context()
        self.executor: Executor | None = None
        self.mode_approver: ModeApprover | None = None
        self.phase1: Phase1Result | None = None
        self.intent = frontend_intent(request.request, modify=bool(request.base_run_id))
        self.base: BaseRun | None = None  # the run a modify run continues (pipeline/modify.py)
        self.model_change: ModelChange | None = None
        self.choice: planner.Choice | None = None  # set by select
        self.generated_paths: list[str] = []  # set by generate
        self.phase3: phase3.Phase3Result | None = None  # set by validate
        self.no_model = "no LLM provider is configured"  # why the model is not called, when it is not
        self._environment_line = ""  # the app environment last shown on the timeline

    @property
    def generator(self) -> str:
        """The generator select chose (read by the phases after it)."""
        if self.choice is None:
            raise RuntimeError("the generator was read before select chose it")
        return self.choice.generator

    # -- the run ---------------------------------------------------------------------------

    async def run(self) -> None:
        described = self.provider.describe() if self.provider is not None else {"kind": "none", "label": "none"}
        self.events.emit(
            "run_started",
            request=self.request.request,
            model_name=getattr(self.model, "name", ""),
            provider_label=described["label"],
            provider_kind=described["kind"],
            sandbox_tier=active_tier(self.operator.sandbox_policy),
            shell_tools_enabled=self.operator.shell_tools_enabled,
            run_dir=str(self.ctx.layout.run_dir),
        )
        self._hold_cost_cap()
        try:
            if self.request.base_run_id:
                self.base = await asyncio.to_thread(find_base_run, self.ctx.layout.run_dir.parent, self.request.base_run_id)
            for name, step in (("select", self._select), ("generate", self._generate), ("gap", self._gap),
                               ("customize", self._customize), ("validate", self._validate)):
                await self._phase(name, step)
        except ToolFailure as exc:  # a named refusal (an unknown target or base run, a model BESSER rejects, a spent key)
            self.events.emit("error", code=str(exc.code).upper(), message=exc.message, **budget_fields(exc.data))
            self.events.emit("done", status="budget_exhausted" if exc.code == ErrorCode.BUDGET_EXHAUSTED else "failed",
                             summary=exc.message, phase_durations=self.timer)
            return
        from kernel_ext.generation.manifest import tree_hashes

        current = await asyncio.to_thread(tree_hashes, self.ctx.layout.app_dir)  # reads every file: off the loop
        assert self.phase3 is not None  # validate ran: every phase ends or raises
        self._finish(self.phase3, current)

    def _hold_cost_cap(self) -> None:
        """A cost cap over a live model with no known price cannot be kept: said once, by name;
        an explicit cap is refused and the model not called (``meter.unpriced_verdict``)."""
        from kernel_ext.providers.meter import unpriced_verdict

        if self.provider is None or getattr(self.provider, "kind", "") != "live":
            return
        verdict = unpriced_verdict(str(self.provider.model), self.provider.meter, self.budgets.max_cost_usd,
                                   "max_cost_usd" in self.request.model_fields_set, self.budgets.max_tokens)
        if verdict is not None:
            refused, message = verdict
            self.events.emit("error", code="COST_UNPRICED", message=message, terminal=False)
            if refused:
                self.no_model, self.provider = f"COST_UNPRICED: {message}", None

    async def _phase(self, name: str, step: Callable[[], Awaitable[PhaseOutcome]]) -> None:
        self.events.emit("phase", phase=name, status="started")
        started = time.monotonic()
        outcome = await step()
        self.timer[name] = round(time.monotonic() - started, 3)
        self.events.emit("phase", phase=name, status=outcome.status, message=outcome.message,
                         duration_s=self.timer[name], details=outcome.details)

    # -- phases ----------------------------------------------------------------------------

    async def _select(self) -> PhaseOutcome:
        from kernel_ext.generation.registry import phase1_choices, resolve_target

        choices = phase1_choices({"domain"})
        if self.request.target:
            resolve_target(self.request.target, {"domain"})  # an explicit target is honoured as-is, or refused by name
        choice = self.choice = await planner.choose_generator(self.request.request, self.request.target, choices, self.provider,
                                                              budget=self.budgets.call_budget())
        if choice.note:  # never silent: a stack no generator covers is said on the timeline
            self.events.emit("finding", severity="warning", source="stack-metadata", message=choice.note)
        frontend = "yes" if self.intent.needed else "no"
        return PhaseOutcome("done", f"{choice.generator} ({choice.how}); frontend: {frontend} - {self.intent.reason}",
                            {"generator": choice.generator, "how": choice.how, "frontend": self.intent.needed})

    async def _generate(self) -> PhaseOutcome:
        from kernel_ext.generation.manifest import ledger_of
        from kernel_ext.generation.phase1 import run_phase1
        from kernel_ext.model.jsonform import model_digest, model_to_dict

        await self._settle_method_bodies()
        ledger = ledger_of(self.tool_context.state)
        if self.base is not None:
            from kernel_ext.pipeline.modify import copy_app, model_change

            if self.base.model_digest == model_digest(self.model):
                copied = await asyncio.to_thread(copy_app, self.base, self.ctx.layout.app_dir)
                ledger.files.update(self.base.generated)
                self.generated_paths = sorted(self.base.generated)
                # the copy skips a run's own files; the probe is written fresh
                write_probe(self.workspace.root, self.operator, self.generator)
                return PhaseOutcome("skipped", f"continuing from run {self.base.run_id} ({copied} files); the model is unchanged",
                                    {"base_run_id": self.base.run_id, "files": copied})
            self.model_change = model_change((self.base.recipe.get("model") or {}).get("form") or {}, model_to_dict(self.model))
        self.phase1 = await asyncio.to_thread(
            run_phase1, self.model, self.workspace, self.generator, ledger=ledger,
            sandbox_policy=self.operator.sandbox_policy,
        )
        self.generated_paths = [f.path for f in self.phase1.files]
        self._prestart_app_host()
        write_probe(self.workspace.root, self.operator, self.generator)
        for finding in self.phase1.findings:
            self.events.emit("finding", **finding.as_event())
        source = f"BESSER {self.phase1.besser_version}" if self.phase1.kind == "besser" else "the stack's build metadata"
        reused = " (reused from cache)" if self.phase1.reused_from_cache else ""
        return PhaseOutcome("done", f"{len(self.phase1.files)} files from {source}{reused}",
                            {"files": len(self.phase1.files), "ok": self.phase1.ok,
                             "reused_from_cache": self.phase1.reused_from_cache})

    async def _gap(self) -> PhaseOutcome:
        if self.base is not None:
            from kernel_ext.pipeline.modify import carry_tasks

            carry_tasks(self.tasks, self.base, self.model_change)
        if self.intent.needed:
            self.tasks.add("Build the frontend: complete CRUD for every entity, wired to the backend", origin="request",
                           verifier=self._frontend_check)
        if self.provider is None:
            return PhaseOutcome("skipped", f"{self.no_model}; Phase 2 is skipped (Phase 1 and Phase 3 run for real)")
        scaffold = prompts.first_message(planner.scaffold_summary(self.generated_paths), self._phase1_findings())
        planned = await planner.plan_gap(
            self.provider, self.request.request, scaffold, self._overview(),
            budget=self.budgets.call_budget(),
        )
        for text in planned:
            self.tasks.add(text, origin="request")
        self.events.emit("task_list", tasks=self.tasks.outcomes())
        if not self.tasks.tasks:
            return PhaseOutcome("done", "the scaffold already does what was asked; Phase 2 is skipped", {"tasks": 0})
        return PhaseOutcome("done", f"{len(self.tasks.tasks)} tasks", {"tasks": len(self.tasks.tasks)})

    async def _customize(self) -> PhaseOutcome:
        if self.provider is None:
            return PhaseOutcome("skipped", self.no_model)
        if not self.tasks.tasks:
            return PhaseOutcome("skipped", "nothing to customise")
        from kernel_ext.tools.written_lines import record_start  # what "this run changed" is measured from
        await asyncio.to_thread(record_start, self.tool_context.state, self.ctx.layout.app_dir)
        conversation = self._conversation()
        result = await customize(
            self.provider, conversation, self._executor(), self.events, self.tasks,
            LoopGuards(self.budgets, EditChurn()), failing_scenarios=self._failing_scenarios,
        )
        return PhaseOutcome("done" if result.stop == "finished" else "failed", f"{result.stop}: {result.reason}", {"turns": result.turns})

    async def _validate(self) -> PhaseOutcome:
        layout = self.ctx.layout
        repair = partial(self._repair, self.provider) if self.provider is not None else None
        result = await phase3.run_phase3(
            layout.app_dir, layout.snapshots_dir, self._validation_sweep, repair,
            turns_left=self.budgets.turns_left(), should_continue=lambda: self.budgets.spent() is None,
            emit=self.events.emit, rounds=self.switches.repair_rounds, rounds_cap=self.switches.rounds_cap,
        )
        for finding in result.report.findings:
            if finding.severity != "blocker":  # blockers were reported by the sweep that found them
                self.events.emit("finding", **finding.as_event())
        self.phase3 = result
        left = len(result.report.blockers)
        return PhaseOutcome("done", f"{plural(left, 'blocker')} left after {plural(result.rounds, 'repair round')} ({result.stop_reason})",
                            {"rounds": result.rounds, "rolled_back": result.rolled_back, "blockers": len(result.report.blockers)})

    async def _settle_method_bodies(self) -> None:
        """The model's method bodies enter generated code only on a card's yes (``pipeline/method_bodies.py``)."""
        from kernel_ext.pipeline.method_bodies import settle_method_bodies

        approver = self._approver()
        settled = await settle_method_bodies(self.model, self.operator.model_method_bodies, approver,
                                             boundary_observer(self.events, approver), run_id=self.ctx.run_id)
        self.model = self.tool_context.services["domain_model"] = settled.model  # Phase 2's generator tools see the same
        for finding in settled.findings:
            self.events.emit("finding", **finding.as_event())

    def _prestart_app_host(self) -> None:
        """Start the run's sandboxed app host now, so Phase 2's first test_api and Phase 3 find it warm."""
        if self.generator in ("fastapi_backend", "web_app"):
            from kernel_ext.validation.hosting import prestart_app_host

            prestart_app_host(self.tool_context.state, policy=self.operator.sandbox_policy)

    # -- validation and repair -------------------------------------------------------------

    async def _validation_sweep(self) -> ValidationReport:
        from kernel_ext.tools.api_test import validate_run

        shell = self.tool_context.shell
        if shell is not None:  # a dev server or watcher must not write while the tree is checked
            await asyncio.to_thread(shell.stop_processes)

        result = await asyncio.to_thread(validate_run, self.tool_context)
        report = result.report
        if result.environment_line and result.environment_line != self._environment_line:
            self._environment_line = result.environment_line  # which interpreter and packages the app ran with
            self.events.emit("finding", severity="info", source="app-environment", message=result.environment_line)
        if self.operator.toolchain_validation:
            from kernel_ext.pipeline.toolchain import toolchain_findings

            report = report.merged(ValidationReport(tuple(await asyncio.to_thread(toolchain_findings, self.ctx.layout.app_dir))))
        if self.intent.needed and not await asyncio.to_thread(frontend_files, self.ctx.layout.app_dir):
            missing = Finding("blocker", "frontend", "a frontend was needed and there are no frontend files")
            report = report.merged(ValidationReport((missing,)))
        for finding in report.blockers:
            self.events.emit("finding", **finding.as_event())
        return report

    async def _repair(self, provider: Provider, report: ValidationReport, round_no: int) -> phase3.RoundOutcome:
        conversation = self._conversation()
        listing = "\n".join(f"- [{f.source}] {f.message}" + (f" ({f.path}:{f.line})" if f.path else "") for f in report.blockers)
        conversation.user(f"[host] Phase 3, repair round {round_no}. Fix these blockers, then answer without a tool call:\n{listing}")
        before = self.tasks.revision
        budgets = Budgets(min(REPAIR_TURNS_PER_ROUND, max(self.budgets.turns_left(), 1)), max_cost_usd=self.request.max_cost_usd,
                          max_runtime_s=max(self.request.max_runtime_s - self.budgets.elapsed(), 1))
        budgets.cost_usd = self.budgets.cost_usd
        result = await customize(provider, conversation, self._executor(), self.events, TaskList(),
                                 LoopGuards(budgets, EditChurn(), max_victory_refusals=0))
        self.budgets.turns += budgets.turns
        self.budgets.cost_usd = provider.meter.cost_usd
        return phase3.RoundOutcome(obligations_changed=self.tasks.revision != before, note=result.stop)

    # -- pieces ----------------------------------------------------------------------------

    def _tool_context(self) -> ToolContext:
        services: dict[str, Any] = {
            "workspace": self.workspace,
            "domain_model": self.model,
            TASKS: self.tasks,
            "run_options": self.switches,
        }
        if self.operator.shell_tools_enabled:
            services["shell"] = shell_for_run(self.ctx, self.operator)
        context = ToolContext(services=services)
        context.state.run_id = self.ctx.run_id
        return context

    def _executor(self) -> Executor:
        if self.executor is None:
            from kernel_ext.generation.registry import redundant_tools

            allowed = [Category.PLAN, Category.EDIT, Category.GENERATE, Category.TEST]
            if self.operator.shell_tools_enabled:
                allowed.append(Category.SHELL)
            policy = ExecutionPolicy.allowing(allowed, deny=redundant_tools(self.generator))
            approver = self._approver()
            self.executor = Executor(default_catalog(), self.tool_context, policy=policy, approver=approver,
                                     observer=boundary_observer(self.events, approver), run_id=self.ctx.run_id,
                                     known_secrets=self.ctx.known_secrets)
        return self.executor

    def _approver(self) -> ModeApprover:
        """The person's ``--approve`` choice over the run's card approver (one for the whole run)."""
        if self.mode_approver is None:
            self.mode_approver = ModeApprover(self.ctx.approver, self.request.approve)
        return self.mode_approver

    def _overview(self) -> str:
        from kernel_ext.model.service import model_index
        from kernel_ext.model.views import overview

        return overview(model_index(self.model, self.tool_context.state))

    def _conversation(self) -> Conversation:
        backend = self.generator in ("fastapi_backend", "web_app")
        system = prompts.system_prompt(frontend=self.intent.needed, shell=self.operator.shell_tools_enabled,
                                       fastapi_backend=backend, model_overview=self._overview(), tasks=self.tasks.render(),
                                       runbook=self.switches.shell_runbook)
        conversation = Conversation(system=system)
        conversation.user(prompts.first_message(self.request.request, self._phase1_findings()))
        return conversation

    def _phase1_findings(self) -> list[Finding] | None:
        """What Phase 1's output checks found (None when Phase 1 did not run): Phase 2's first context."""
        return self.phase1.findings if self.phase1 is not None else None

    def _failing_scenarios(self) -> list[str]:
        from kernel_ext.validation.retained import scenario_store

        return scenario_store(self.tool_context.state).failing()

    async def _frontend_check(self) -> tuple[bool, str]:
        found = await asyncio.to_thread(frontend_files, self.ctx.layout.app_dir)
        return (bool(found), f"{len(found)} frontend files" if found else "no frontend files yet")

    def _finish(self, result: phase3.Phase3Result, current: dict[str, str]) -> None:
        from kernel_ext.generation.manifest import ledger_of

        report = result.report
        ledger = ledger_of(self.tool_context.state)
        split = ledger.split(current)
        blockers = [f"[{f.source}] {f.message}" for f in report.blockers]
        open_tasks = [f"{t.id} {t.text}" for t in self.tasks.open_tasks()]
        failing = self._failing_scenarios() if self.provider is not None else []
        verification = {
            "tasks": self.tasks.outcomes(),
            "boots": report.boots,
            "cannot_create": list(report.cannot_create),
            "cannot_run": list(report.cannot_run),
            "failing_scenarios": failing,
            "open_tasks": open_tasks,
        }
        incomplete = bool(blockers or open_tasks or failing or report.runtime_failure())
        write_recipe(self.ctx.layout, self.request, self.generator, self.model, self.tasks.outcomes(), current,
                     phase_durations=self.timer, provider=self.provider, phase3=self.phase3,
                     generated=ledger_of(self.tool_context.state).files, base_run_id=self.request.base_run_id,
                     known_secrets=self.events.known_secrets)
        summary = (f"{plural(len(split['generator_untouched']), 'generator file')} untouched"
                   f"{' (generated output reused from cache)' if ledger.reused_from_cache else ''}, "
                   f"{len(split['generator_llm_modified'])} modified by the LLM, {len(split['llm_authored'])} LLM-authored; "
                   f"{plural(len(blockers), 'blocker')}, "
                   + (f"{plural(len(open_tasks), 'open task')}" if self.provider is not None else
                      # no tasks were ever derived: "0 open tasks" would read as "all you asked is done"
                      "your request beyond BESSER's generator output was not worked on (no LLM provider: "
                      "set one with --provider or BESSER_LLM_PROVIDER)"))
        status, summary = self.budgets.ending("blocked" if incomplete else "completed", summary)
        self.events.emit("done", status=status, authorship=split, blockers=blockers + open_tasks,
                         verification=verification, phase_durations=self.timer, summary=summary)
