"""Phase 1 output, checked before Phase 2 starts: syntax, imports, and does the app import.

Findings found here are handed to Phase 2 as context instead of being discovered later.
Messages use the prefixes Phase 3 ranks by (``syntax error in``, ``missing module:``,
``application startup:``) so one vocabulary runs through the pipeline.

The app-import check executes model-derived code (a model's method bodies land in the ORM's
class bodies), so it runs only in a one-off sandbox (``run_confined``): the operator's tier,
network off, the scrubbed environment, the host's ``/proc`` and files out of sight, writes
only to a temporary copy of the generated files and a throwaway SQLite database, a timeout.
Where no tier can start, the check is not run (``app_import`` says so, with a
``sandbox_unavailable`` finding); under the operator's explicit ``off`` tier it runs
unconfined and a ``sandbox_off`` finding says that it did.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from kernel_ext.findings import Finding  # the one finding shape of the pipeline
from kernel_ext.pyparse import parse_source

# Generator output is shaped by BESSER's templates (no hostile nesting), and a large model makes
# large modules: parsed up to the workspace read cap, past pyparse's bound for LLM-written code.
GENERATED_MAX_BYTES = 8 * 1024 * 1024

IMPORT_TIMEOUT_S = 60.0
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@dataclass
class CheckReport:
    findings: list[Finding] = field(default_factory=list)
    python_files: int = 0
    app_import: str = "skipped: no entry module"
    app_import_tier: str = ""  # the sandbox tier the app import ran under ("" when it did not run)
    seconds: float = 0.0

    @property
    def blockers(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "blocker"]


def check_files(files: dict[str, bytes], app_root: str = "", entrypoint: str | None = None,
                *, import_app: bool = True, timeout: float = IMPORT_TIMEOUT_S, policy: str | None = None) -> CheckReport:
    """Check generated ``files`` (workspace path -> bytes) whose app lives under ``app_root``.

    ``policy`` is the operator's sandbox policy for the app import (default: the server's).
    """
    started = time.perf_counter()
    report = CheckReport()
    root = PurePosixPath(app_root.strip("/")) if app_root.strip("/") else PurePosixPath()
    python = {p: b for p, b in files.items() if p.endswith(".py")}
    report.python_files = len(python)
    local = _local_modules(files, root)
    requirements = requirement_names(files.get(str(root / "requirements.txt") if app_root else "requirements.txt", b""))
    missing: set[str] = set()
    resolved: set[str] = set(local) | set(sys.stdlib_module_names)
    for path, data in sorted(python.items()):
        try:
            tree = parse_source(data.decode("utf-8"), filename=path, max_bytes=GENERATED_MAX_BYTES)
        except (SyntaxError, UnicodeDecodeError, ValueError) as exc:
            line = getattr(exc, "lineno", None)
            where = f"{path} line {line}" if line is not None else path
            report.findings.append(Finding("blocker", "phase1.syntax", f"syntax error in {where}: {getattr(exc, 'msg', exc)}", path, line))
            continue
        report.findings += import_findings(path, tree, resolved, missing, requirements)
    if not (import_app and entrypoint):
        report.app_import = "skipped: no entry module" if not entrypoint else "skipped: not requested"
    elif str(root / f"{entrypoint}.py") not in files:
        report.app_import = f"skipped: {entrypoint}.py was not generated"
    elif report.blockers:
        report.app_import = "skipped: syntax errors"
    elif missing:
        report.app_import = f"skipped: {', '.join(sorted(missing))} not installed in this interpreter"
        report.findings.append(Finding("info", "phase1.app_import", f"app import not checked: {report.app_import[9:]}"))
    else:
        _check_app_import(report, files, root, entrypoint, timeout, policy)
    report.seconds = time.perf_counter() - started
    return report


def import_findings(path: str, tree: ast.Module, resolved: set[str], missing: set[str], requirements: set[str],
                    source: str = "phase1.imports") -> list[Finding]:
    """``missing module:`` warnings for the top-level imports of ``tree`` that neither ``resolved``
    (local and standard modules, grown as names are found installed) nor this interpreter provide;
    a name already in ``missing`` is not said again."""
    found: list[Finding] = []
    for name, line in _imports(tree):
        if name in resolved or name in missing:
            continue
        if importlib.util.find_spec(name) is not None:
            resolved.add(name)
        else:
            missing.add(name)
            listed = "listed in requirements.txt, " if name.lower() in requirements else ""
            found.append(Finding("warning", source, f"missing module: {name} (imported by {path}; {listed}not installed here)",
                                 path, line))
    return found


def _local_modules(files: dict[str, bytes], root: PurePosixPath) -> set[str]:
    names = set()
    for path in files:
        rel = PurePosixPath(path)
        try:
            rel = rel.relative_to(root)
        except ValueError:
            continue
        first = rel.parts[0]
        names.add(first[:-3] if first.endswith(".py") and len(rel.parts) == 1 else first)
    return names


def requirement_names(data: bytes) -> set[str]:
    """The package names a requirements.txt lists (lower case, ``-`` as ``_``)."""
    names = set()
    for raw in data.decode("utf-8", "replace").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name = line.replace(" ", "")
            for sep in ("[", "=", "<", ">", "~", "!", ";"):
                name = name.split(sep, 1)[0]
            names.add(name.lower().replace("-", "_"))
    return names


def _imports(tree: ast.Module) -> list[tuple[str, int]]:
    """Top-level names of absolute imports not guarded by ``try/except ImportError``."""
    found: list[tuple[str, int]] = []

    def guarded(node: ast.Try) -> bool:
        for handler in node.handlers:
            kinds = handler.type
            names = [kinds] if not isinstance(kinds, ast.Tuple) else list(kinds.elts)
            if kinds is None or any(isinstance(n, ast.Name) and n.id in _IMPORT_ERRORS for n in names):
                return True
        return False

    def visit(block: list, optional: bool) -> None:
        # Statements only: an import never sits inside an expression, so expressions are skipped.
        for node in block:
            if isinstance(node, ast.Import):
                if not optional:
                    found.extend((alias.name.split(".")[0], node.lineno) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if not optional and node.level == 0 and node.module:
                    found.append((node.module.split(".")[0], node.lineno))
            elif isinstance(node, ast.Try) and guarded(node):
                visit(node.body, True)
                visit([*node.handlers, *node.orelse, *node.finalbody], optional)
            else:
                for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                    inner = getattr(node, name, None)
                    if isinstance(inner, list):
                        visit(inner, optional)

    visit(tree.body, False)
    return found


def _check_app_import(report: CheckReport, files: dict[str, bytes], root: PurePosixPath, entrypoint: str,
                      timeout: float, policy: str | None) -> None:
    from kernel_ext.errors import ToolFailure
    from kernel_ext.sandbox import OFF_WARNING, Tier

    try:
        ok, detail, tier = _import_entry(files, root, entrypoint, timeout, policy)
    except ToolFailure as exc:  # no sandbox: the generated code is not run at all (fail closed)
        report.app_import = f"skipped: {exc.message}"
        report.findings.append(Finding("warning", "phase1.app_import", f"app import not checked: {exc.message}; "
                                       "generated code never runs outside the sandbox", code=exc.code))
        return
    report.app_import = "ok" if ok else "failed"
    report.app_import_tier = tier
    if tier == Tier.OFF:
        report.findings.append(Finding("warning", "phase1.app_import", f"the app import check ran unconfined: {OFF_WARNING}",
                                       code="sandbox_off"))
    if not ok:
        report.findings.append(Finding("blocker", "phase1.app_import", f"application startup: importing {entrypoint} failed: {detail}",
                                       str(root / f"{entrypoint}.py")))


def _import_entry(files: dict[str, bytes], root: PurePosixPath, entrypoint: str, timeout: float,
                  policy: str | None) -> tuple[bool, str, str]:
    """(imported, why not, tier): import the entry module in a one-off sandbox over a temporary copy."""
    from kernel_ext.sandbox import run_confined

    with tempfile.TemporaryDirectory(prefix="besser-phase1-check-") as tmp:
        base, home = Path(tmp) / "app", Path(tmp) / "home"
        home.mkdir()
        for path, data in files.items():
            try:
                rel = PurePosixPath(path).relative_to(root)
            except ValueError:
                continue
            target = base.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        base.mkdir(exist_ok=True)
        env = {"PYTHONDONTWRITEBYTECODE": "1", "DATABASE_URL": f"sqlite:///{Path(tmp) / 'phase1-check.db'}"}
        code = "import sys; sys.path.insert(0, '.'); import importlib; importlib.import_module(sys.argv[1])"  # the name is data
        done = run_confined([sys.executable, "-B", "-c", code, entrypoint], tmp, timeout, network=False, cwd=base, env=env,
                            home=home, policy=policy, spill_output=False, label=f"phase 1: import {entrypoint}")
        base_text = str(Path(tmp).resolve() / "app")
    if done.timed_out:
        return False, f"did not finish within {timeout:.0f} s", done.tier
    if done.exit_code == 0:
        return True, "", done.tier
    lines = [ln for ln in done.stderr.text.strip().splitlines() if ln.strip()]
    where = next((ln.strip() for ln in reversed(lines) if ln.strip().startswith("File ") and "/app/" in ln), "")
    last = lines[-1].strip() if lines else f"exit code {done.exit_code}"
    return False, (f"{last} ({where.replace(base_text, '')})" if where else last)[:600], done.tier
