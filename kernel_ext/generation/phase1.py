"""Phase 1: run one deterministic BESSER generator (or a stack's build files) into a workspace.

``run_phase1`` is the reusable step the pipeline (and ``python -m kernel_ext generate``)
calls: check the model and its names (``model/names.py``), honour the chosen target as-is, generate into a private directory,
publish through the fence, record what was produced (paths and hashes, for the authorship
split), then check the output so its findings reach Phase 2 as context. The same model, generator
and options a second time take the files (and the settled checks) from Phase 1's cache
(``outputcache``): published, recorded and reported as a fresh generation would be, marked
``reused_from_cache``.

It is synchronous (a second or two, several for a 200-class app's import check): async
callers run it with ``asyncio.to_thread``.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_ext.findings import Finding
from kernel_ext.generation import outputcache
from kernel_ext.generation.checks import CheckReport, check_files
from kernel_ext.generation.manifest import GeneratedFile, GenerationLedger
from kernel_ext.generation.registry import resolve_target
from kernel_ext.generation.runner import GeneratedOutput, PublishReport, generate, parse_options, publish_output

if TYPE_CHECKING:  # BESSER loads with the first model
    from besser.BUML.metamodel.structural import DomainModel


@dataclass
class Phase1Result:
    generator: str
    kind: str  # besser | metadata
    options: dict[str, Any]
    subdir: str
    files: list[GeneratedFile]
    published: PublishReport
    checks: CheckReport
    model_name: str
    model_digest: str
    besser_version: str
    generator_seconds: float
    total_seconds: float
    notes: list[str] = field(default_factory=list)
    reused_from_cache: bool = False  # the files (and checks, when kept) came from Phase 1's cache

    @property
    def findings(self) -> list[Finding]:
        return list(self.checks.findings)

    @property
    def ok(self) -> bool:
        return not self.checks.blockers

    def to_dict(self) -> dict[str, Any]:
        return {
            "generator": self.generator,
            "kind": self.kind,
            "options": self.options,
            "subdir": self.subdir,
            "ok": self.ok,
            "files": [asdict(f) for f in self.files],
            "created": len(self.published.created),
            "overwritten": self.published.overwritten,
            "unchanged": len(self.published.unchanged),
            "findings": [f.as_event() for f in self.findings],
            "app_import": self.checks.app_import,
            "app_import_tier": self.checks.app_import_tier,
            "model": {"name": self.model_name, "digest": self.model_digest},
            "besser_version": self.besser_version,
            "seconds": {"generator": round(self.generator_seconds, 4), "checks": round(self.checks.seconds, 4),
                        "total": round(self.total_seconds, 4)},
            "notes": self.notes,
            "reused_from_cache": self.reused_from_cache,
        }


def run_phase1(
    model: DomainModel,
    out_dir: Any,
    generator: str = "fastapi_backend",
    options: Any = None,
    *,
    gui_model: Any = None,
    check: bool = True,
    import_app: bool = True,
    ledger: GenerationLedger | None = None,
    sandbox_policy: str | None = None,
) -> Phase1Result:
    """Generate ``generator``'s output for ``model`` into ``out_dir`` (a path or a Workspace).

    A generator that starts processes, and the app-import check, run sandboxed under
    ``sandbox_policy`` (default: the server's policy).
    """
    from kernel_ext.model.jsonform import model_digest
    from kernel_ext.model.loading import load
    from kernel_ext.model.names import check_names
    from kernel_ext.workspace import Workspace

    started = time.perf_counter()
    loaded = load(model)
    check_names(loaded.model, origin=loaded.origin)  # before anything is written
    models = {"domain": loaded.model, "gui": gui_model}
    present = frozenset(k for k, v in models.items() if v is not None)
    spec = resolve_target(generator, present)
    if isinstance(out_dir, Workspace):
        workspace = out_dir
    else:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        workspace = Workspace(out_dir)
    digest = model_digest(loaded.model)
    opts = parse_options(spec, options)
    settings = outputcache.CacheSettings.from_environment()
    key = outputcache.output_key(spec.name, opts.model_dump(mode="json"), digest, besser_version()) \
        if outputcache.cacheable(spec, models) else None
    with outputcache.slot(settings if key else outputcache.CacheSettings(None), key or "") as slot:
        check_key = outputcache.checks_key(import_app, sandbox_policy) if key and check else ""
        hit = slot.read(check_key)
        if hit is None:  # made and first checked under the key's lock: runs with this key wait, then reuse it
            output = generate(spec, models, opts, policy=sandbox_policy)
            checks = _check(output, check, import_app, sandbox_policy)
            if key:
                slot.store(output.files, check_key, checks if check else None, output.stubbed)
    if hit is not None:
        output = GeneratedOutput(spec, opts, hit.files, 0.0, stubbed=hit.stubbed)
        checks = hit.checks if hit.checks is not None and check else _check(output, check, import_app, sandbox_policy)
        if check and hit.checks is None and key:  # checked again outside the lock (an unsettled report is not kept)
            with outputcache.slot(settings, key) as again:
                again.add_checks(check_key, checks)
    published = publish_output(workspace, output)
    manifest = output.manifest()
    if ledger is not None:
        ledger.record(spec.name, manifest, output.options.model_dump(), reused_from_cache=hit is not None)
    checks.findings[:0] = output.findings()  # how the generator itself ran (a confined one under ``off``, stubs)
    checks.findings[:0] = [Finding("warning", "phase1.cache", note, code="phase1_cache_unsafe") for note in slot.notes]
    return Phase1Result(
        generator=spec.name,
        kind=spec.kind,
        options=output.options.model_dump(),
        subdir=spec.subdir,
        files=manifest,
        published=published,
        checks=checks,
        model_name=loaded.model.name,
        model_digest=digest,
        besser_version=besser_version(),
        generator_seconds=output.seconds,
        total_seconds=time.perf_counter() - started,
        notes=[*loaded.notes, *loaded.warnings, *(["Phase 1 output reused from cache"] if hit else [])],
        reused_from_cache=hit is not None,
    )


def _check(output: GeneratedOutput, check: bool, import_app: bool, policy: str | None) -> CheckReport:
    spec = output.spec
    if check and spec.kind == "besser":
        return check_files(output.files, spec.check_root, spec.entrypoint, import_app=import_app, policy=policy)
    return CheckReport(app_import="skipped: not requested" if not check else "skipped: build files only")


def besser_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("besser")
    except PackageNotFoundError:  # pragma: no cover - besser is a dependency
        return os.environ.get("BESSER_VERSION", "unknown")
