"""``test_api`` and ``validate_app``: run the generated backend for real, report redacted.

``test_api {action?, scenario_id?, name?, backend?, requests?, correction_reason?}``:
``run`` executes up to 20 declarative requests against a fresh copy of the backend with a
fresh SQLite database, in a child of the run's sandboxed warm host (network unshared, whether
or not shell tools are on); a named scenario is retained and replayed after source changes;
``list`` shows the retained ones; ``get`` shows one's exact inputs, expectations and last
report without running it. ``validate_app {}`` returns the report Phase 3 ranks.

Both honour the run option ``enable_import_smoke_check`` (``services["run_options"]``, a
mapping or an object; on by default): when it is off, nothing of the app is executed.
The pipeline calls ``validate_run(ctx)``, ``replay_all(ctx)`` and ``failing_scenarios(state)``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal

from pydantic import Field

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.tools.base import Category, ToolArgs, ToolContext, ToolOutcome, ToolSpec
from kernel_ext.validation.retained import MAX_RETAINED, failing_scenarios, scenario_store
from kernel_ext.validation.scenario import MAX_REQUESTS, RequestSpec

__all__ = ["TOOLS", "close_app_hosts", "failing_scenarios", "replay_all", "runtime_enabled", "validate_run"]

SMOKE_OPTION = "enable_import_smoke_check"


class TestApiArgs(ToolArgs):
    action: Literal["run", "list", "get"] = "run"
    scenario_id: str | None = Field(default=None, max_length=80, pattern=r"^[A-Za-z0-9_.:-]+$",
                                    description="retain the scenario under this id; with no requests, replay the saved one")
    name: str | None = Field(default=None, max_length=120, description="a title (its slug is the id when scenario_id is absent)")
    backend: str | None = Field(default=None, max_length=300, description="the backend folder (default: found automatically)")
    requests: list[RequestSpec] | None = Field(default=None, min_length=1, max_length=MAX_REQUESTS)
    correction_reason: str | None = Field(default=None, max_length=2000,
                                          description="required to change a retained scenario: why the saved one is wrong")


class ValidateAppArgs(ToolArgs):
    backend: str | None = Field(default=None, max_length=300, description="the backend folder (default: found automatically)")


def runtime_enabled(ctx: ToolContext) -> bool:
    """The run option ``enable_import_smoke_check`` (default on)."""
    options = ctx.services.get("run_options")
    if options is None:
        return True
    value = options.get(SMOKE_OPTION, True) if isinstance(options, dict) else getattr(options, SMOKE_OPTION, True)
    return bool(value)


def _host(ctx: ToolContext) -> Any:
    """The host installed by the caller (``services["app_host"]``), else the run's own; it knows
    whether the run has shell tools (a refusal for unmet requirements then names install_dependencies)."""
    host = ctx.services.get("app_host")
    if host is None:
        from kernel_ext.validation.hosting import app_host

        host = app_host(ctx.state)
    shell = ctx.shell
    host.shell_tools = shell is not None and bool(shell.enabled)
    return host


def _source(ctx: ToolContext, backend: str | None) -> Any:
    from kernel_ext.validation import staging

    ws = ctx.service("workspace")
    return staging.read_source(ws, staging.locate(ws, backend))


def _model(ctx: ToolContext) -> Any:
    service = ctx.services.get("domain_model")
    if service is None:
        return None
    from kernel_ext.model.service import domain_model_of

    return domain_model_of(service)


# -- test_api -------------------------------------------------------------------------------------


def run_test_api(args: TestApiArgs, ctx: ToolContext) -> ToolOutcome:
    from kernel_ext.validation.scenario import scenario_key

    store = scenario_store(ctx.state)
    sid = scenario_key(args.scenario_id, args.name)
    if args.action == "list":
        listing = store.listing()
        lines = [f"{len(listing)} retained scenario(s) (at most {MAX_RETAINED}):"]
        lines += [f"- {i['scenario_id']}: {i['requests']} requests, last {i['last']}" for i in listing]
        return ToolOutcome("\n".join(lines), {"scenarios": listing})
    if args.action == "get":
        if not sid:
            raise ToolFailure(ErrorCode.MISSING_ARGUMENT, "action='get' needs scenario_id")
        shown = store.shown(sid)
        return ToolOutcome(json.dumps({k: v for k, v in shown.items() if k != "last_report"}, indent=1, default=str)
                           + ("\nlast report: " + shown["last_report"]["summary"] if shown["last_report"] else "\nnever run"),
                           shown)
    if not runtime_enabled(ctx):
        raise ToolFailure(ErrorCode.RUNTIME_CHECKS_DISABLED, f"test_api runs the app, and this run has {SMOKE_OPTION} off")
    from kernel_ext.validation.retained import run_requests
    from kernel_ext.validation.scenario import check_requests

    if args.requests is None:
        if not sid:
            raise ToolFailure(ErrorCode.MISSING_ARGUMENT, "give requests, or the scenario_id of a retained scenario to replay")
        retained = store.get(sid)
        requests, backend, name = retained.requests, args.backend or retained.backend, retained.name
    else:
        check_requests(list(args.requests))
        requests, backend, name = list(args.requests), args.backend, args.name
        if sid:
            store.save(sid, args.name, requests, backend, args.correction_reason)
        else:
            store.remember(requests)
    source = _source(ctx, backend)
    report = run_requests(_host(ctx), source, requests, scenario_id=sid, name=name, known=store.known())
    if sid:
        store.record(sid, report)
    data = {"report": report.for_widget(), "passed": report.passed, "scenario_id": sid, "retained": bool(sid),
            "failing_scenarios": store.failing()}
    return ToolOutcome(report.to_text(), data)


# -- validate_app -----------------------------------------------------------------------------------


def replay_all(ctx: ToolContext, *, force: bool = False, parallel: int = 2) -> dict[str, Any]:
    """Replay retained scenarios whose last run is older than the current source; ``{id: ScenarioReport}``."""
    from kernel_ext.validation.retained import replay

    store = scenario_store(ctx.state)
    if not store.scenarios or not runtime_enabled(ctx):
        return {}
    reports: dict[str, Any] = {}
    by_backend: dict[str | None, list[str]] = {}
    for sid, item in list(store.scenarios.items()):
        by_backend.setdefault(item.backend, []).append(sid)
    host = _host(ctx)
    for backend, ids in by_backend.items():
        reports.update(replay(store, host, _source(ctx, backend), force=force, parallel=parallel, only=ids))
    return reports


def validate_run(ctx: ToolContext, backend: str | None = None) -> Any:
    """validate_app plus the run's retained scenarios (replayed when stale; failing ones are blockers).

    This is the check Phase 3 runs; ``.report`` is the ``ValidationReport`` it ranks.
    """
    from kernel_ext.findings import Finding, ValidationReport
    from kernel_ext.validation.validate import validate_app

    runtime = runtime_enabled(ctx)
    result = validate_app(ctx.service("workspace"), backend, model=_model(ctx), state=ctx.state, runtime=runtime,
                          host=_host(ctx) if runtime else None)
    if not runtime:
        return result
    extra = []
    try:
        replay_all(ctx)
    except ToolFailure as exc:  # the verdicts stay those of the last replay; say why they are not fresh
        extra.append(Finding("blocker", "test_api", f"retained scenarios could not be replayed: {exc.message}", code="scenario_failed"))
    store = scenario_store(ctx.state)
    for sid in store.failing():
        report = store.scenarios[sid].last_report
        first = report.failures[0] if report and report.failures else "failed"
        extra.append(Finding("blocker", "test_api", f"scenario {sid} fails: {first}", code="scenario_failed"))
    if extra:
        r = result.report
        result = dataclasses.replace(result, report=ValidationReport(r.findings + tuple(extra), r.boots, r.cannot_create, r.cannot_run))
    return result


def run_validate_app(args: ValidateAppArgs, ctx: ToolContext) -> ToolOutcome:
    result = validate_run(ctx, args.backend)
    return ToolOutcome(result.to_text(), result.to_data())


def close_app_hosts(run_id: str | None = None, state: Any = None) -> int:
    """End the warm hosts of ``run_id`` (call when a run ends, with its ``state``)."""
    from kernel_ext.validation.hosting import close_app_hosts as close

    return close(run_id, state)


TOOLS = (
    ToolSpec(
        name="test_api",
        category=Category.TEST,
        args_model=TestApiArgs,
        description=(
            "Run declarative HTTP requests (at most 20) against a fresh copy of the generated FastAPI backend with a fresh "
            "SQLite database, in a sandbox without network. Requests share state; use {{N.field.path}} to reuse values from "
            "response N (0-based), e.g. /books/{{0.book.id}}/ or \"Bearer {{1.access_token}}\". Cookies set by responses are "
            "kept. Assert expected_status and expected_fields (dotted path -> value). Give scenario_id to retain the scenario: "
            "it is replayed after every source change and must pass before the run can complete; changing it needs "
            "correction_reason. action='list' shows retained scenarios, action='get' shows one without running it. "
            "Paths only (no URLs); headers: Authorization, Accept, Content-Type, Accept-Language, If-Match, If-None-Match, "
            "Idempotency-Key, X-*."
        ),
        run=run_test_api,
        requires=frozenset({"workspace"}),
        blocking=True,
    ),
    ToolSpec(
        name="validate_app",
        category=Category.TEST,
        args_model=ValidateAppArgs,
        description=(
            "Check the backend as Phase 3 does: syntax, imports and undefined names (blockers), then start the app in a "
            "sandbox, create every entity through the API with minimal valid data and run every action; retained test_api "
            "scenarios are replayed. Returns findings with severity and code."
        ),
        run=run_validate_app,
        requires=frozenset({"workspace"}),
        blocking=True,
    ),
)
