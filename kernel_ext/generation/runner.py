"""Run one target into a private temporary directory, then publish its files through the fence.

BESSER's generators write wherever they are pointed, so they are pointed at an empty
temporary directory outside the workspace (a generator that starts processes runs whole in a
sandbox over that directory: ``confined.py``); their output is read back as bytes and only then
written into the workspace with ``kernel_ext.workspace.publish`` (atomic, no-follow, inside
the fence). Generator output is never rewritten: bytes go in as produced.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.generation.manifest import GeneratedFile, sha256_bytes
from kernel_ext.generation.targets import GeneratorSpec, Options
from kernel_ext.workspace import treewalk

MAX_OUTPUT_FILES = 20_000
MAX_OUTPUT_BYTES = 256 * 1024 * 1024
_SKIP_DIRS = frozenset({"__pycache__", ".pytest_cache", "node_modules"})
# BESSER's generators were written for one call at a time (shared template environments,
# module-level state); callers may run them from worker threads, so they take turns.
_BESSER_LOCK = threading.Lock()


@dataclass(frozen=True)
class GeneratedOutput:
    spec: GeneratorSpec
    options: Options
    files: dict[str, bytes]  # workspace-relative path -> bytes (subdir included)
    seconds: float
    tier: str = ""  # the sandbox tier a confined generator ran under ("" when it ran in-process)
    stubbed: int = 0  # model method bodies the operator's ``off`` turned into stubs here

    def findings(self) -> list[Any]:
        """What a person must know about how it ran (a confined generator under ``off``, stubs)."""
        from kernel_ext.findings import Finding
        from kernel_ext.generation.confined import off_findings
        from kernel_ext.model.method_bodies import ENV

        found = off_findings(self.spec.label, self.tier) if self.tier else []
        if self.stubbed:
            found.append(Finding("warning", "model", f"{self.stubbed} model method bodies were generated as stubs "
                                 f"(the operator turned model method bodies off: {ENV}=off)", code="model_method_bodies_removed"))
        return found

    def manifest(self) -> list[GeneratedFile]:
        return [GeneratedFile(p, sha256_bytes(b), len(b)) for p, b in sorted(self.files.items())]


@dataclass
class PublishReport:
    created: list[str] = field(default_factory=list)
    overwritten: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


def parse_options(spec: GeneratorSpec, options: Any) -> Options:
    if isinstance(options, spec.options):
        return options
    try:
        return spec.options.model_validate(dict(options or {}))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'options'}: {e['msg']}" for e in exc.errors(include_url=False))
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"{spec.name} options: {problems}") from None


def generate(spec: GeneratorSpec, models: dict[str, Any], options: Any = None, *, policy: str | None = None) -> GeneratedOutput:
    """Run ``spec`` on ``models`` (``{"domain": DomainModel, ...}``) and read its output back.

    A ``confined`` target runs in a one-off sandbox under ``policy`` (default: the operator's),
    the scratch folder its only writable place; the others run in this process.
    """
    missing = spec.missing(frozenset(k for k, v in models.items() if v is not None))
    if missing:
        raise ToolFailure(ErrorCode.GENERATOR_UNAVAILABLE, f"{spec.name} needs a {' and a '.join(missing)} model")
    opts = parse_options(spec, options)
    if models.get("domain") is not None:
        from kernel_ext.model.names import check_names

        check_names(models["domain"])  # every generator call: names are identifiers before they are code
        models, stubbed = _operator_stubs(models)
    scratch = Path(tempfile.mkdtemp(prefix=f"besser-gen-{spec.name}-"))
    try:
        out = scratch / "out"
        out.mkdir()
        started = time.perf_counter()
        tier = ""
        if spec.confined:  # its own process in its own sandbox: no shared BESSER state to guard
            from kernel_ext.generation.confined import produce_confined

            tier = produce_confined(spec, models, scratch, out, opts, policy=policy)
        else:
            with _BESSER_LOCK:
                try:
                    spec.produce(models, out, opts)
                except ToolFailure:
                    raise
                except Exception as exc:  # noqa: BLE001 - BESSER raised: name it, keep the run alive
                    raise ToolFailure(
                        ErrorCode.GENERATION_FAILED, f"BESSER's {spec.label} generator failed: {type(exc).__name__}: {exc}"
                    ) from None
        seconds = time.perf_counter() - started
        try:
            files = _collect(out, spec.subdir)
        except OSError as exc:  # a confined generator left a link (or worse) where its output folder was
            raise ToolFailure(ErrorCode.GENERATION_FAILED,
                              f"BESSER's {spec.label} generator left no plain output folder ({exc.strerror}); "
                              "nothing was read from it") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not files:
        raise ToolFailure(ErrorCode.GENERATION_FAILED, f"BESSER's {spec.label} generator wrote no files")
    return GeneratedOutput(spec, opts, files, seconds, tier, stubbed)


def _operator_stubs(models: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The operator's ``BESSER_MODEL_METHOD_BODIES=off`` holds on every path into a generator
    (the cards and flags upstream decide the ``ask`` case): foreign bodies become stubs."""
    from kernel_ext.model.method_bodies import ENV, foreign_bodies, method_mode, without_bodies

    if method_mode(os.environ.get(ENV)) != "off":
        return models, 0
    bodies = foreign_bodies(models["domain"])
    if not bodies:
        return models, 0
    return {**models, "domain": without_bodies(models["domain"], bodies)}, len(bodies)


def _collect(out: Path, subdir: str) -> dict[str, bytes]:
    """The generator's regular files (through descriptors: links and FIFOs it left are never read)."""
    files: dict[str, bytes] = {}
    total = 0
    prefix = f"{subdir.strip('/')}/" if subdir.strip("/") else ""
    fd = treewalk.open_dir(out)
    try:
        for rel, file_fd, st in treewalk.regular_files(fd, frozenset(_SKIP_DIRS)):
            if rel.endswith(".pyc"):
                continue
            total += st.st_size
            if len(files) >= MAX_OUTPUT_FILES or total > MAX_OUTPUT_BYTES:
                raise ToolFailure(ErrorCode.TOO_LARGE, "the generator produced more output than a run accepts")
            files[prefix + rel] = b"".join(treewalk.read_chunks(file_fd, st.st_size))  # never past what was counted
    finally:
        os.close(fd)
    return files


def existing_targets(workspace: Any, output: GeneratedOutput) -> list[str]:
    """Paths the output would overwrite (they exist in the workspace now)."""
    return [path for path in output.files if workspace.lstat(path) is not None]


def publish_output(workspace: Any, output: GeneratedOutput, *, must_be_new: frozenset[str] = frozenset()) -> PublishReport:
    """Write every file atomically; identical files are left alone.

    ``must_be_new`` are paths that did not exist when the call was prepared: if one appeared
    since, nothing is written (``stale_input``). Each write also checks the file is still the
    one just looked at, so a concurrent change is refused rather than overwritten.
    """
    from kernel_ext.workspace import publish, snapshot

    appeared = [p for p in sorted(must_be_new) if p in output.files and workspace.lstat(p) is not None]
    if appeared:
        raise ToolFailure(
            ErrorCode.STALE_INPUT,
            f"{appeared[0]!r} was created after the call was prepared ({len(appeared)} such files); nothing was written",
        )
    report = PublishReport()
    for path, data in sorted(output.files.items()):
        before = snapshot(workspace, path)
        if before.problem:
            workspace.lstat(path)  # re-raises the fence's own refusal (a link on the way, ...)
            code = ErrorCode.SYMLINK_REFUSED if "symlink" in before.problem else ErrorCode.NOT_REGULAR_FILE
            written = len(report.created) + len(report.overwritten)
            raise ToolFailure(code, f"{path!r}: {before.problem}; {written} files before it were written")
        if before.exists and before.sha256 == sha256_bytes(data):
            report.unchanged.append(path)
            continue
        publish(workspace, path, data, expected=before.identity if before.exists else None)
        (report.overwritten if before.exists else report.created).append(path)
    return report
