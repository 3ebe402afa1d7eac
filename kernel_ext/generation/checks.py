"""Phase 1 output, checked before Phase 2 starts: syntax, imports, and does the app import.

Findings found here are handed to Phase 2 as context instead of being discovered later.
Messages use the prefixes Phase 3 ranks by (``syntax error in``, ``missing module:``,
``application startup:``) so one vocabulary runs through the pipeline.

Each file is compiled once (syntax), and the names it imports are read off its bytecode: only
a file naming a module that neither the app, the standard library nor this interpreter provides
is parsed into a tree, to tell a guarded import from a missing one (so a 200-class app is not
turned into Python trees file by file). Each distinct module name is looked up once.

The app-import check executes model-derived code, so it runs only in a one-off sandbox
(``appimport``), importing the bytecode compiled here.
Where no tier can start, the check is not run (``app_import`` says so, with a
``sandbox_unavailable`` finding); under the operator's explicit ``off`` tier it runs
unconfined and a ``sandbox_off`` finding says that it did.
"""

from __future__ import annotations

import ast
import dis
import importlib.util
import sys
import time
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from types import CodeType

from kernel_ext.findings import Finding  # the one finding shape of the pipeline
from kernel_ext.pyparse import compile_source, parse_source

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
    # False when the app import was wanted but did not succeed or could not run: a result that may
    # be the machine's (load, a sandbox that would not start), so Phase 1's cache does not keep it
    settled: bool = True

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
    absent: set[str] = set()
    code: dict[str, CodeType] = {}
    for path, data in sorted(python.items()):
        try:
            compiled = compile_source(data.decode("utf-8"), path, max_bytes=GENERATED_MAX_BYTES)
            # only a file naming a module nobody provides is made a tree, to tell guarded imports apart
            tree = parse_source(data, filename=path, max_bytes=GENERATED_MAX_BYTES) \
                if _unresolved(imported_names(compiled), resolved, missing, absent) else None
        except (SyntaxError, UnicodeDecodeError, ValueError) as exc:
            line = getattr(exc, "lineno", None)
            where = f"{path} line {line}" if line is not None else path
            report.findings.append(Finding("blocker", "phase1.syntax", f"syntax error in {where}: {getattr(exc, 'msg', exc)}", path, line))
            continue
        code[path] = compiled
        if tree is not None:
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
        _check_app_import(report, files, code, root, entrypoint, timeout, policy)
    report.seconds = time.perf_counter() - started
    return report


_IMPORT_NAME = dis.opmap["IMPORT_NAME"]
_EXTENDED_ARG = dis.EXTENDED_ARG


def imported_names(code: CodeType) -> set[str]:
    """Every top-level name an ``import`` in ``code`` (nested functions and classes included) names,
    guarded or not, relative ones as written: a superset of what ``_imports`` reports."""
    names: set[str] = set()
    stack = [code]
    while stack:
        co = stack.pop()
        stack.extend(c for c in co.co_consts if isinstance(c, CodeType))
        raw = co.co_code
        at = raw.find(_IMPORT_NAME)
        while at >= 0:
            if at % 2 == 0:  # wordcode: an opcode at every even offset, its argument after it
                arg, shift, back = raw[at + 1], 8, at - 2
                while back >= 0 and raw[back] == _EXTENDED_ARG:
                    arg |= raw[back + 1] << shift
                    shift, back = shift + 8, back - 2
                name = co.co_names[arg].split(".")[0]
                if name:
                    names.add(name)
            at = raw.find(_IMPORT_NAME, at + 1)
    return names


def _unresolved(names: set[str], resolved: set[str], missing: set[str], absent: set[str]) -> bool:
    """True when one of ``names`` (not yet reported ``missing``) is neither known nor installed; each
    name is looked up once (``resolved`` and ``absent`` grow as names are)."""
    found = False
    for name in names - resolved - missing:
        if name not in absent and importlib.util.find_spec(name) is not None:
            resolved.add(name)
        else:
            absent.add(name)
            found = True
    return found


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


def _check_app_import(report: CheckReport, files: dict[str, bytes], code: dict[str, CodeType], root: PurePosixPath,
                      entrypoint: str, timeout: float, policy: str | None) -> None:
    from kernel_ext.errors import ToolFailure
    from kernel_ext.generation.appimport import import_entry
    from kernel_ext.sandbox import OFF_WARNING, Tier

    try:
        ok, detail, tier = import_entry(files, code, root, entrypoint, timeout, policy)
    except ToolFailure as exc:  # no sandbox: the generated code is not run at all (fail closed)
        report.settled = False
        report.app_import = f"skipped: {exc.message}"
        report.findings.append(Finding("warning", "phase1.app_import", f"app import not checked: {exc.message}; "
                                       "generated code never runs outside the sandbox", code=exc.code))
        return
    report.app_import = "ok" if ok else "failed"
    report.app_import_tier = tier
    report.settled = ok
    if tier == Tier.OFF:
        report.findings.append(Finding("warning", "phase1.app_import", f"the app import check ran unconfined: {OFF_WARNING}",
                                       code="sandbox_off"))
    if not ok:
        report.findings.append(Finding("blocker", "phase1.app_import", f"application startup: importing {entrypoint} failed: {detail}",
                                       str(root / f"{entrypoint}.py")))
