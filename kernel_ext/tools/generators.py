"""``generate_<target>`` tools: BESSER's generators, one tool each, writing through the fence.

Arguments are the target's options with BESSER's own names (``http_methods``, ``dbms``,
``backend``, ``nested_creations``...). ``prepare`` runs the generator into a private
directory (it is deterministic and has no side effect there) so the approval request can
say exactly which files will be created or overwritten, and so the boundary snapshots the
files that will be overwritten. That preview is no side effect even for a generator that
executes model-derived code (SQL, Django): such a target runs whole in a one-off sandbox
(``generation/confined.py``: network off, no host secrets, writes only to a scratch folder
that is then removed), so a denied card truly means nothing reached the host. ``run`` publishes that output (files that were new at
preparation must still be new), records the files in the run's generation ledger (for the
authorship split) and reports syntax and import findings. A tool is offered only when the
models its generator needs are services of the run. Both steps run in a worker thread so a
generation (up to a second or two) never blocks the event loop of the server hosting the run.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.generation.registry import ALL_TARGETS
from kernel_ext.generation.targets import GeneratorSpec
from kernel_ext.safetext import plural
from kernel_ext.tools.base import Category, Preparation, ToolArgs, ToolContext, ToolOutcome, ToolSpec

if TYPE_CHECKING:
    from kernel_ext.generation.runner import GeneratedOutput

SERVICE_FOR_KIND = {"domain": "domain_model", "gui": "gui_model"}
_PENDING = "generation.pending"
_MAX_PENDING = 4
_LIST = 40


def _models(spec: GeneratorSpec, ctx: ToolContext) -> dict[str, Any]:
    from kernel_ext.model.service import domain_model_of

    models = {kind: ctx.services.get(service) for kind, service in SERVICE_FOR_KIND.items()}
    models["domain"] = domain_model_of(models["domain"]) if models["domain"] is not None else None
    reason = spec.unavailable_reason(frozenset(k for k, v in models.items() if v is not None))
    if reason:
        raise ToolFailure(ErrorCode.GENERATOR_UNAVAILABLE, reason)
    return models


PendingKey = tuple[str, str, tuple[int, ...]]


def _key(spec: GeneratorSpec, args: ToolArgs, models: dict[str, Any]) -> PendingKey:
    return (spec.name, args.model_dump_json(), tuple(id(m) for m in models.values()))


def _pending(ctx: ToolContext) -> dict[PendingKey, tuple[GeneratedOutput, frozenset[str]]]:
    """Outputs a card was prepared from, kept until the approved call writes them."""
    pending: dict[PendingKey, tuple[GeneratedOutput, frozenset[str]]] = ctx.state.store(_PENDING, dict)
    return pending


def _make(spec: GeneratorSpec) -> ToolSpec:
    def prepare_sync(args: ToolArgs, ctx: ToolContext) -> Preparation:
        from kernel_ext.generation.runner import existing_targets, generate

        models = _models(spec, ctx)
        # Runs before the card on purpose (the card lists the exact files). Safe to run unasked:
        # in-process targets only render templates into a private folder, and a target that
        # starts processes runs confined (``spec.confined``), so the preview changes nothing
        # outside its own removed scratch folder and "approval_denied ... nothing ran" holds.
        output = generate(spec, models, args)
        existing = existing_targets(ctx.service("workspace"), output)
        pending = _pending(ctx)
        pending[_key(spec, args, models)] = (output, frozenset(output.files) - set(existing))
        while len(pending) > _MAX_PENDING:
            pending.pop(next(iter(pending)))
        where = f"{spec.subdir}/" if spec.subdir else "the workspace root"
        proposal = f"{spec.tool_name} writes {plural(len(output.files), 'file')} under {where}: {len(output.files) - len(existing)} new"
        if existing:
            shown = ", ".join(existing[:_LIST]) + (" ..." if len(existing) > _LIST else "")
            proposal += f", {len(existing)} overwritten if their content differs: {shown}"
        return Preparation(files=tuple(existing), proposal=proposal,
                           data={"files": sorted(output.files)[:500], "overwrites": existing[:500]})

    def run_sync(args: ToolArgs, ctx: ToolContext) -> ToolOutcome:
        from kernel_ext.generation.checks import check_files
        from kernel_ext.generation.manifest import ledger_of
        from kernel_ext.generation.runner import existing_targets, generate, publish_output
        from kernel_ext.tools.written_lines import record_generated

        models = _models(spec, ctx)
        workspace = ctx.service("workspace")
        cached = _pending(ctx).pop(_key(spec, args, models), None)
        if cached is None:
            output = generate(spec, models, args)
            new = frozenset(output.files) - set(existing_targets(workspace, output))
        else:
            output, new = cached
        report = publish_output(workspace, output, must_be_new=new)
        ledger_of(ctx.state).record(spec.name, output.manifest(), output.options.model_dump())
        record_generated(ctx.state, output.files)  # its code is baseline: a copy of it proves nothing
        checks = check_files(output.files, spec.check_root, spec.entrypoint, import_app=False)
        checks.findings[:0] = output.findings()  # a confined generator under the operator's ``off``
        return ToolOutcome(_observation(spec, output, report, checks), {
            "generator": spec.name,
            "options": output.options.model_dump(),
            "files": sorted(output.files)[:500],
            "created": report.created[:500],
            "overwritten": report.overwritten[:500],
            "unchanged": len(report.unchanged),
            "findings": [f.as_event() for f in checks.findings[:100]],
        })

    async def prepare(args: ToolArgs, ctx: ToolContext) -> Preparation:
        return await asyncio.to_thread(prepare_sync, args, ctx)

    async def run(args: ToolArgs, ctx: ToolContext) -> ToolOutcome:
        return await asyncio.to_thread(run_sync, args, ctx)

    args_model = type(
        "Generate" + "".join(part.title() for part in spec.name.split("_")) + "Args",
        (spec.options, ToolArgs),
        {"__module__": __name__, "__doc__": f"Options of BESSER's {spec.label} generator."},
    )
    requires = frozenset({"workspace"} | {SERVICE_FOR_KIND[k] for k in spec.needs})
    return ToolSpec(
        name=spec.tool_name,
        category=Category.GENERATE,
        args_model=args_model,
        description=f"Run BESSER's {spec.label} generator: {spec.description}",
        run=run,
        prepare=prepare,
        requires=requires,
    )


def _observation(spec: GeneratorSpec, output: Any, report: Any, checks: Any) -> str:
    where = f"{spec.subdir}/" if spec.subdir else "the workspace root"
    lines = [
        f"{spec.label}: {len(report.created)} new and {len(report.overwritten)} changed files under {where} "
        f"({len(report.unchanged)} unchanged), generated in {output.seconds:.2f} s"
    ]
    written = report.created + report.overwritten
    lines.extend(f"  {path}" for path in written[:_LIST])
    if len(written) > _LIST:
        lines.append(f"  ... {len(written) - _LIST} more (list_files {spec.subdir or '.'})")
    if checks.findings:
        lines.append(f"findings ({len(checks.findings)}):")
        lines.extend(f"  [{f.severity}] {f.message}" for f in checks.findings[:20])
    return "\n".join(lines)


TOOLS: tuple[ToolSpec, ...] = tuple(_make(spec) for spec in ALL_TARGETS if spec.kind == "besser")
