"""validate_app: the check Phase 3 and the ``validate_app`` tool share.

Source contracts first (syntax, missing modules, names that do not resolve: blockers), then,
in a fresh child of the run's sandboxed app host: every module imported (import smoke), the
app started (import, ORM mappers, start-up handlers), every entity created through the API
with minimal valid data, every action run once. Each finding has a severity and a stable
code; the result converts to the ``ValidationReport`` Phase 3 ranks.

Codes: syntax_error, missing_module, undefined_name, ruff_unavailable, startup_failed,
mapper_config, import_failed, openapi_failed, create_failed, create_unverified,
abstract_skipped, action_failed, action_unverified, probe_failed, sandbox_unavailable,
runtime_skipped, no_backend, source_skipped, scenario_failed.
"""

from __future__ import annotations

import ast
import re
import time
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.findings import Finding, ValidationReport
from kernel_ext.pyparse import parse_source
from kernel_ext.validation.staging import Source

if TYPE_CHECKING:  # the host is built on demand (its module imports the sandbox's worker)
    from kernel_ext.validation.apphost.host import AppHost

PROBE_TIMEOUT_S = 90.0
SMOKE_SKIP_DIRS = frozenset({"alembic", "migrations", "scripts", "tests", "test"})
SMOKE_SKIP_FILES = frozenset({"setup.py", "conftest.py", "__main__.py", "manage.py"})
_WHERE = re.compile(r"\(([^()\s]+\.py):(\d+)\)\s*$")


@dataclass
class AppValidation:
    """The report Phase 3 ranks, plus what the probe saw (for people and the model)."""

    report: ValidationReport
    backend: str = ""
    digest: str = ""
    entities: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    sandbox: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)  # AppEnvironment.describe(): interpreter, packages
    environment_line: str = ""

    @property
    def verified(self) -> bool:
        return not self.report.blockers and self.report.boots is not False

    def to_data(self, limit: int = 40) -> dict[str, Any]:
        r = self.report
        return {
            "verified": self.verified, "blocker_count": len(r.blockers), "boots": r.boots,
            "cannot_create": list(r.cannot_create), "cannot_run": list(r.cannot_run), "rank": list(r.rank()),
            "findings": [{"severity": f.severity, "code": f.code, "source": f.source, "message": f.message,
                          "path": f.path, "line": f.line} for f in r.findings[:limit]],
            "remaining_findings": max(0, len(r.findings) - limit),
            "entities": self.entities, "actions": self.actions, "backend": self.backend, "source_digest": self.digest,
            "sandbox": self.sandbox, "timings": self.timings, "environment": self.environment,
        }

    def to_text(self, limit: int = 40) -> str:
        r = self.report
        boots = {True: "the app starts", False: "the app does NOT start", None: "start-up not checked"}[r.boots]
        lines = [f"validate_app: {len(r.blockers)} blocker(s); {boots}; cannot create: {', '.join(r.cannot_create) or 'none'}; "
                 f"cannot run: {', '.join(r.cannot_run) or 'none'}"]
        order = {"blocker": 0, "warning": 1, "info": 2}
        shown = sorted(r.findings, key=lambda f: order.get(f.severity, 3))[:limit]
        lines += [f"[{f.severity}] {f.code}: {f.message}" for f in shown]
        if len(r.findings) > limit:
            lines.append(f"... {len(r.findings) - limit} more findings")
        created = [e["entity"] for e in self.entities if e.get("verdict") == "created"]
        if created:
            lines.append(f"created through the API: {', '.join(created)}")
        return "\n".join(lines)

    def to_html(self) -> str:
        from kernel_ext.validation.report_html import validation_html

        return validation_html(self)


def smoke_modules(files: dict[str, bytes], entry: str) -> list[str]:
    """Modules the import smoke imports: every module except tests, migrations and scripts
    that start something at import time (a top-level ``run(...)``/``serve(...)``/``main()`` call)."""
    modules = []
    for rel in sorted(files):
        path = PurePosixPath(rel)
        if path.suffix != ".py" or path.name in SMOKE_SKIP_FILES or any(p in SMOKE_SKIP_DIRS for p in path.parts[:-1]):
            continue
        if path.name.startswith("test_") or not all(p.isidentifier() for p in [*path.parts[:-1], path.stem]):
            continue
        name = ".".join(path.parts[:-1]) if path.name == "__init__.py" else ".".join([*path.parts[:-1], path.stem])
        if not name or name == entry or _starts_something(files[rel]):
            continue
        modules.append(name)
    return modules


def _starts_something(data: bytes) -> bool:
    try:
        tree = parse_source(data)
    except (SyntaxError, ValueError):
        return False  # imported anyway: the import reports the syntax error
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("run", "serve", "main", "run_app"):
                return True
    return False


_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([A-Za-z_][\w.]*)'")


def _located(folder: str, message: str) -> tuple[str | None, int | None]:
    match = _WHERE.search(message or "")
    if not match:
        return None, None
    rel = match.group(1)
    return (rel if folder in ("", ".") else f"{folder}/{rel}"), int(match.group(2))


def runtime_findings(
    reply: dict[str, Any], folder: str, own_modules: frozenset[str] = frozenset()
) -> tuple[list[Finding], bool | None, list[str], list[str], dict[str, Any]]:
    """(findings, boots, cannot_create, cannot_run, probe result) from the host's reply.

    ``own_modules``: the app's own top-level module names (a missing one of those is the app's
    bug, not a package to install)."""
    if reply.get("op") != "result":
        code = reply.get("code") or "probe_failed"
        message = f"runtime unverified: the start-up probe did not finish ({code}): {reply.get('message')}"
        return [Finding("blocker", "probe", message, code="probe_failed")], (False if code == "timeout" else None), [], [], {}
    result = reply.get("result") or {}
    if result.get("internal_error"):
        return [Finding("blocker", "probe", f"runtime unverified: the probe failed: {result['internal_error']}",
                        code="probe_failed")], None, [], [], result
    findings: list[Finding] = []
    boot = result.get("boot") or {}
    if not boot.get("ok"):
        error = boot.get("error") or "the entry module did not import"
        path, line = _located(folder, error)
        missing = _MISSING_MODULE.search(error)
        # a package the environment lacks: say which and what to do, not the import chain
        if missing and missing.group(1).split(".")[0] not in own_modules:
            top = missing.group(1).split(".")[0]
            findings.append(Finding("blocker", "requirements", f"application startup: the app imports {top!r}, which is not "
                                    "installed in its environment: add the package that provides it to requirements.txt "
                                    "(the run then provides it from the sources the operator allows)", path, line,
                                    "module_missing"))
        else:
            findings.append(Finding("blocker", "startup", f"application startup: {error}", path, line, "startup_failed"))
        return findings, False, [], [], result
    boots: bool | None = True
    if boot.get("mapper_error"):
        path, line = _located(folder, boot["mapper_error"])
        findings.append(Finding("blocker", "startup", f"mapper config: {boot['mapper_error']}", path, line, "mapper_config"))
        boots = False
    lifespan = result.get("lifespan") or {}
    if not lifespan.get("ok", True):
        findings.append(Finding("blocker", "startup", f"application startup: start-up handler failed: {lifespan.get('error')}",
                                code="startup_failed"))
        boots = False
    for item in result.get("imports") or []:
        path, line = _located(folder, item["error"])
        findings.append(Finding("blocker", "import", f"python contract: importing {item['module']} failed: {item['error']}",
                                path, line, "import_failed"))
    if result.get("openapi_error"):
        findings.append(Finding("blocker", "openapi", f"the OpenAPI schema cannot be built: {result['openapi_error']}",
                                code="openapi_failed"))
    cannot_create, cannot_run = [], []
    for entity in result.get("entities") or []:
        name, verdict, where = entity["entity"], entity["verdict"], f"POST {entity['path']}"
        if verdict == "failed":
            cannot_create.append(name)
            findings.append(Finding("blocker", "create",
                                    f"create contract: {name} cannot be created through {where} with minimal "
                                    f"valid data ({entity.get('detail') or 'no detail'})", code="create_failed"))
        elif verdict == "unauthorized":
            findings.append(Finding("warning", "create", f"create unverified: {where} needs authentication "
                                    f"({entity.get('detail')}); check it with test_api", code="create_unverified"))
        elif verdict == "abstract":
            findings.append(Finding("info", "create", f"{name} is abstract: created through its subclasses",
                                    code="abstract_skipped"))
    for action in result.get("actions") or []:
        label = f"{action['entity']}.{action['action']}"
        if action["verdict"] == "failed":
            cannot_run.append(label)
            findings.append(Finding("blocker", "action", f"action call: {label} failed ({action.get('detail')})",
                                    code="action_failed"))
        elif action["verdict"] in ("rejected", "unverified"):
            findings.append(Finding("warning", "action",
                                    f"action unverified: {label} ({action.get('detail') or action['verdict']})",
                                    code="action_unverified"))
    return findings, boots, cannot_create, cannot_run, result


def validate_source(source: Source, host: AppHost, *, hints: dict[str, Any] | None = None, runtime: bool = True) -> AppValidation:
    """Static checks of ``source`` plus (when ``runtime``) the probe in a fresh child of ``host``."""
    from kernel_ext.validation.source_checks import static_findings

    started = time.perf_counter()
    folder = source.backend.folder
    findings = static_findings(source.files, folder)
    findings += [Finding("info", "staging", f"not checked: {s}", code="source_skipped") for s in source.skipped]
    timings = {"static_ms": round((time.perf_counter() - started) * 1000, 2)}
    result = AppValidation(ValidationReport(tuple(findings)), source.backend.describe(), source.digest, timings=timings)
    if not runtime:
        findings.append(Finding("info", "probe", "start-up, create and action checks are off for this run "
                                "(enable_import_smoke_check)", code="runtime_skipped"))
        result.report = ValidationReport(tuple(findings))
        return result
    probe_started = time.perf_counter()
    try:
        staged = host.stage(source)
        job = {"kind": "probe", "modules": smoke_modules(source.files, source.backend.entry), "hints": hints}
        reply = host.run(staged, job, timeout=PROBE_TIMEOUT_S)
    except ToolFailure as exc:
        if exc.code in (ErrorCode.REQUIREMENTS_UNMET, ErrorCode.REQUIREMENTS_INVALID):  # one finding, never a traceback
            findings.append(Finding("blocker", "requirements", f"the app was not started: {exc.message}",
                                    f"{folder}/requirements.txt" if folder != "." else "requirements.txt", None,
                                    exc.code))
        else:
            findings.append(Finding("blocker", "probe",
                                    f"runtime unverified: {exc.message}; start-up and create were not checked",
                                    code="sandbox_unavailable" if exc.code == "sandbox_unavailable" else "probe_failed"))
        result.report = ValidationReport(tuple(findings))
        return result
    environment = getattr(staged, "environment", None)
    if environment is not None:
        result.environment, result.environment_line = environment.describe(), environment.line()
    own = frozenset(PurePosixPath(rel).parts[0].removesuffix(".py") for rel in source.files)
    more, boots, cannot_create, cannot_run, probe = runtime_findings(reply, folder, own)
    result.report = ValidationReport(tuple(findings + more), boots, tuple(cannot_create), tuple(cannot_run))
    result.entities = probe.get("entities") or []
    result.actions = probe.get("actions") or []
    result.sandbox = getattr(host, "tier", "")
    timings["probe_ms"] = round((time.perf_counter() - probe_started) * 1000, 2)
    return result


def validate_app(workspace: Any, backend: str | None = None, *, model: Any = None, state: Any = None,
                 runtime: bool = True, host: Any = None, policy: str | None = None) -> AppValidation:
    """Validate the backend in ``workspace`` (a ``Workspace`` or a folder path).

    ``model`` (a B-UML DomainModel) sharpens the create probe; ``state`` (a RunState) caches
    the result per source digest and finds the run's warm host; ``runtime=False`` keeps to
    the static checks (the run option ``enable_import_smoke_check`` off).
    """
    from kernel_ext.validation import staging
    from kernel_ext.validation.hints import model_hints
    from kernel_ext.validation.hosting import app_host
    from kernel_ext.workspace import Workspace

    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    try:
        located = staging.locate(ws, backend)
    except ToolFailure as exc:
        if backend is not None:
            raise  # a folder the caller named: its absence is the caller's error
        # Nothing to run (a Django or frontend-only app): nothing to rank it by either.
        return AppValidation(ValidationReport((Finding("info", "staging", f"runtime checks skipped: {exc.message}",
                                                       code="no_backend"),)))
    source = staging.read_source(ws, located)
    hints = model_hints(model)
    cache = state.store("validate_app.cache", dict) if state is not None else {}
    key = (source.digest, runtime, repr(hints))
    if key in cache:
        return cache[key]
    if host is None and runtime:
        host = app_host(state, policy=policy)
    result = validate_source(source, host, hints=hints, runtime=runtime)
    cache.clear()
    cache[key] = result
    return result


async def validate_app_async(*args: Any, **kwargs: Any) -> AppValidation:
    """``validate_app`` in a worker thread (for the pipeline's event loop)."""
    import asyncio

    return await asyncio.to_thread(validate_app, *args, **kwargs)
