"""The entry points that start a generation run: the body the server hosts, and the API.

``generation_body(request, operator)`` is what the server extension and the magics call;
``generate(...)`` is the Python API for library runs and notebooks (explicit arguments
instead of the environment where the caller gives them). Both load the model (off the event
loop) and the provider first and check the model's names, so a bad model, a name that is not an
identifier or a misconfigured provider ends the run with a named error before anything is generated.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from kernel_ext.hosting.layout import RunLayout
from kernel_ext.hosting.options import ApproveMode, BudgetArgs, OperatorSettings, RunRequest
from kernel_ext.hosting.run import Run, RunBody, RunContext, start_run
from kernel_ext.secrets import secret_values

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # BESSER, the providers and the tools load when a run starts
    from besser.BUML.metamodel.structural import DomainModel

    from kernel_ext.boundary.approval import ApprovalRequest, Approver
    from kernel_ext.providers.base import Provider
    from kernel_ext.tools.base import RunState


def warm_up() -> None:
    """What every run imports and builds once per process, done at the server's start-up
    (``hosting.bodies.preload``): the orchestrator and its phases, the tool catalog and each
    tool's schema, the replay provider, the app host and validation."""
    from kernel_ext.pipeline import orchestrator  # noqa: F401 - imported for its side effect: loaded once
    from kernel_ext.providers import factory, replay  # noqa: F401
    from kernel_ext.tools.registry import default_catalog
    from kernel_ext.validation import hosting, validate  # noqa: F401

    for spec in default_catalog():
        spec.provider_schema()


def generation_body(request: RunRequest, operator: OperatorSettings, *, model: DomainModel | None = None,
                    provider: Provider | None = None) -> RunBody:
    """A run body for ``request``; ``model``/``provider`` objects override what the request names."""

    async def body(ctx: RunContext) -> None:
        from kernel_ext.errors import ToolFailure
        from kernel_ext.pipeline.orchestrator import Orchestrator

        try:
            # A model file is parsed and evaluated, and a cassette or script read, in a worker thread:
            # a hostile one cannot stall the loop.
            loaded = model if model is not None else await asyncio.to_thread(_load_model, request, operator.model_root)
            check_names(loaded)  # names are identifiers before they are code (model/names.py)
            chosen = provider if provider is not None else await asyncio.to_thread(_provider, request, operator)
        except ToolFailure as exc:
            ctx.events.emit("run_started", request=request.request, run_dir=str(ctx.layout.run_dir))
            ctx.events.emit("error", code=str(exc.code).upper(), message=exc.message)
            for problem in exc.data.get("problems", [])[:20]:
                ctx.events.emit("finding", severity="blocker", source="model", message=problem)
            ctx.events.emit("done", status="failed", summary=exc.message)
            return
        orchestrator = Orchestrator(ctx, request, operator, loaded, chosen)  # the provider's keys join the run's
        try:  # from here on a cancel (even during the first await) closes what the orchestrator opened
            await asyncio.to_thread(keep_for_replay, ctx, request, loaded, chosen)
            await orchestrator.run()
        finally:
            if chosen is not None:
                await chosen.aclose()
            shell = orchestrator.tool_context.shell
            if shell is not None:
                shell.close()  # every process of the run's session dies with the run
            # Off the loop (stopping a host waits for its processes); shielded, so a second
            # cancel cannot leave a host and its temporary folder behind.
            await asyncio.shield(asyncio.to_thread(_close_run_resources, ctx, orchestrator.tool_context.state))

    return body


def generate(
    model: object,
    request: str,
    *,
    runs_dir: str | Path = "besser_runs",
    run_dir: str | Path | None = None,
    provider: Provider | str | None = None,
    target: str | None = None,
    approve: ApproveMode = "none",
    approver: Approver | None = None,
    allow_shell_tools: bool | None = None,
    enable_toolchain_validation: bool = False,
    **budgets: Unpack[BudgetArgs],
) -> Run:
    """Start a run on the running event loop and return it (follow, ``await run.wait()``, cancel).

    ``provider`` is a Provider object, a spec string (``none``, ``replay:CASSETTE``,
    ``scripted:FILE``, ``openai``, ``anthropic``) or None (the environment decides).
    ``approver``, when given, answers every card (host code: a callable or ScriptedApprover).
    """
    operator = OperatorSettings.from_environment(
        shell_tools_enabled=allow_shell_tools, toolchain_validation=enable_toolchain_validation
    )
    spec, chosen = (provider, None) if isinstance(provider, str) else (None, provider)
    run_request = RunRequest(request=request, target=target, provider=spec, approve=approve, **budgets)
    loaded = _load_model_value(model)
    check_names(loaded)  # a refusal here leaves nothing on disk
    _hold_files(run_request, operator)  # a cassette or script the run could not read, likewise
    layout = RunLayout(Path(run_dir)) if run_dir is not None else RunLayout.create(Path(runs_dir))
    if run_dir is not None:
        for folder in (layout.app_dir, layout.home_dir, layout.snapshots_dir):
            folder.mkdir(parents=True, exist_ok=True)
    body = generation_body(run_request, operator, model=loaded, provider=chosen)
    run = start_run(body, layout, options=run_request, known_secrets=secret_values())
    if approver is not None:
        run.context.approver.on_request = _answer_with(approver, run)
    return run


def _hold_files(request: RunRequest, operator: OperatorSettings) -> None:
    """``hosting.requests.hold_named_files`` for a library caller: a refusal is a ``ToolFailure``."""
    from kernel_ext.errors import ToolFailure
    from kernel_ext.hosting.requests import RequestRefused, hold_named_files

    try:
        hold_named_files(request, operator)
    except RequestRefused as exc:
        raise ToolFailure(exc.code.lower(), exc.message) from None


def _answer_with(approver: Approver, run: Run) -> Callable[[ApprovalRequest], Awaitable[None]]:
    async def answer(request: ApprovalRequest) -> None:
        from kernel_ext.tools.base import maybe_await

        decision = await maybe_await(approver(request))
        run.decide(request.call_id, decision is True, by="host")

    return answer


def keep_for_replay(ctx: RunContext, request: RunRequest, model: DomainModel, provider: Provider | None) -> None:
    """Keep what re-running this run offline needs (``hosting/export``): the request's budgets and
    switches, the model as code (its creation order is what the generators follow; the recipe's
    JSON form is sorted), and every provider turn as a cassette, all cut of the run's known
    secrets. A provider that already records (a caller's own cassette) keeps its one recorder."""
    import json

    from kernel_ext.model.pycode import ModelCodeUnfaithful, unchecked_code
    from kernel_ext.secrets import matcher

    cut = matcher(ctx.known_secrets).cut  # known keys only, as in cassettes: the replay must match what was sent
    layout = ctx.layout
    fields = request.model_dump(mode="json", exclude={"model_json"})
    fields = {k: cut(v) if isinstance(v, str) else v for k, v in fields.items()}
    try:
        layout.request_path.write_text(json.dumps(fields, indent=2, ensure_ascii=False), encoding="utf-8")
        try:
            layout.model_code_path.write_text(cut(unchecked_code(model)), encoding="utf-8")
        except ModelCodeUnfaithful:
            pass  # BESSER could not write it: an export falls back to the recipe's JSON form
        if provider is not None and provider.recorder is None:
            provider.record(layout.turns_path, secrets=ctx.known_secrets, best_effort=True)
    except (OSError, ValueError) as exc:  # what an export needs is never worth the run itself
        log.warning("run %s: not kept for replay (%s)", ctx.run_id, exc)


def check_names(model: DomainModel) -> None:
    from kernel_ext.model.names import check_names as check

    check(model)


def _load_model(request: RunRequest, root: str | None = None) -> DomainModel:
    from kernel_ext.errors import ErrorCode, ToolFailure
    from kernel_ext.model.jsonform import model_from_dict

    if request.model_json is not None:
        return model_from_dict(request.model_json)
    if request.model_path:
        return _load_model_value(request.model_path, root)
    raise ToolFailure(ErrorCode.MISSING_ARGUMENT, "the request names no model (model_path or model_json)")


def _load_model_value(source: object, root: str | None = None) -> DomainModel:
    from kernel_ext.model.loading import load_model

    return load_model(source, root=root)


def _provider(request: RunRequest, operator: OperatorSettings) -> Provider | None:
    """The provider the request's spec names, else the operator's; None means no provider.

    A file the request names is held under the operator's root (``providers/sources.py``); the
    operator's own spec (``BESSER_LLM_PROVIDER``/``BESSER_LLM_CASSETTE``) is theirs. Reads a file:
    called off the event loop."""
    spec = request.provider or operator.provider
    if spec == "none":
        return None
    root = operator.model_root if request.provider else None
    return provider_from_spec(spec, model=request.llm_model or operator.llm_model, root=root)


def provider_from_spec(spec: str | None, *, model: str | None = None, root: str | None = None) -> Provider | None:
    """``replay:CASSETTE``, ``scripted:FILE``, ``openai``, ``anthropic``; None: the environment.

    A cassette or script is read now, under ``root`` when given (``providers/sources.py``)."""
    import dataclasses

    from kernel_ext.providers.config import ProviderConfig
    from kernel_ext.providers.factory import build_provider
    from kernel_ext.providers.sources import source_of

    name = (spec or "").partition(":")[0]
    source = source_of(spec, root)
    config = ProviderConfig.from_env(provider=name or None, model=model)
    if config.provider is None:
        return None
    if source is not None:
        config = dataclasses.replace(config, source=source.path)
    # Replays ignore tool-result text (paths, timings and read ids differ between machines).
    return build_provider(config, strict_replay=False, root=source.root if source is not None else None)


def _close_run_resources(ctx: RunContext, state: RunState | None = None) -> None:
    try:
        from kernel_ext.tools.api_test import close_app_hosts
        from kernel_ext.tools.import_guard import close_checkers_under

        close_app_hosts(ctx.run_id, state)
        close_checkers_under(str(ctx.layout.app_dir))
    except ImportError:
        pass
