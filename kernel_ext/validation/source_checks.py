"""Source contracts of a backend: syntax, imports, and names that do not resolve.

Syntax and missing modules come from Phase 1's own checker (one vocabulary for the
pipeline). Unresolved names come from ruff (F821 undefined name, F822 undefined name in
``__all__``, F823 local used before assignment), each a blocker. Generated BESSER code
star-imports its own modules everywhere (``from pydantic_classes import *``), which turns
every undefined name into ruff's vague F405 ("may be undefined, or defined from star
imports"); those are settled here by computing what each local star import really exports,
so a name nothing defines is still found. Ruff reads a private copy of the files, never the
workspace itself. Without ruff the check says so (info) instead of passing silently.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from kernel_ext.findings import Finding
from kernel_ext.pyparse import parse_source

RUFF_RULES = "F821,F822,F823,F405"
RUFF_TIMEOUT_S = 60.0
_NAME_IN_MESSAGE = re.compile(r"`([^`]+)`")


def ruff_binary() -> str | None:
    try:
        from ruff import find_ruff_bin

        return find_ruff_bin()
    except (ImportError, FileNotFoundError):
        import shutil

        return shutil.which("ruff")


def static_findings(files: dict[str, bytes], folder: str) -> list[Finding]:
    """Syntax, missing modules and unresolved names of ``files`` (paths relative to ``folder``)."""
    from kernel_ext.generation.checks import check_files

    shown = (lambda rel: rel) if folder in ("", ".") else (lambda rel: f"{folder}/{rel}")
    findings: list[Finding] = []
    checked = check_files(files, "", None, import_app=False)
    for f in checked.findings:
        code = "syntax_error" if "syntax" in f.source else "missing_module" if "imports" in f.source else "source_check"
        message = f.message
        if f.path:
            message = message.replace(f.path, shown(f.path))
        findings.append(Finding(f.severity, "python", message, shown(f.path) if f.path else None, f.line, code))
    broken = {f.path for f in checked.findings if f.severity == "blocker" and f.path}
    findings += name_findings({p: d for p, d in files.items() if p not in broken}, shown)
    return findings


def name_findings(files: dict[str, bytes], shown: Any = lambda rel: rel) -> list[Finding]:
    """Unresolved names (ruff F821-class, with local star imports resolved)."""
    python = {p: d for p, d in files.items() if p.endswith(".py")}
    if not python:
        return []
    binary = ruff_binary()
    if binary is None:
        return [Finding("info", "ruff", "names not checked: ruff is not installed", code="ruff_unavailable")]
    with tempfile.TemporaryDirectory(prefix="besser-ruff-") as tmp:
        for rel, data in python.items():
            target = Path(tmp, rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        argv = [binary, "check", "--isolated", "--no-cache", "--exit-zero", "--output-format", "json",
                "--select", RUFF_RULES, "--target-version", "py311", "."]
        try:
            done = subprocess.run(argv, cwd=tmp, capture_output=True, timeout=RUFF_TIMEOUT_S, stdin=subprocess.DEVNULL)
            reported = json.loads(done.stdout.decode("utf-8") or "[]")
        except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
            return [Finding("info", "ruff", f"names not checked: ruff failed ({exc})", code="ruff_unavailable")]
        prefix = str(Path(tmp).resolve()) + "/"
    exports = StarExports(python)
    findings: list[Finding] = []
    for item in reported:
        code, message = item.get("code"), item.get("message") or ""
        rel = str(item.get("filename") or "").replace(prefix, "")
        line = (item.get("location") or {}).get("row")
        names = _NAME_IN_MESSAGE.findall(message)
        name = names[0] if names else "?"
        if code == "F405" and exports.resolves(rel, name):
            continue
        if code not in ("F821", "F822", "F823", "F405"):
            continue
        what = "local variable used before assignment" if code == "F823" else "undefined name"
        findings.append(Finding("blocker", "ruff", f"{what}: {name} ({shown(rel)} line {line})", shown(rel), line,
                                "undefined_name"))
    return findings


class StarExports:
    """What ``from X import *`` binds, for the backend's own modules (None: cannot know)."""

    def __init__(self, files: dict[str, bytes]):
        self.files = files
        self._cache: dict[str, set[str] | None] = {}
        self._trees: dict[str, ast.Module | None] = {}

    def tree(self, rel: str) -> ast.Module | None:
        if rel not in self._trees:
            try:
                self._trees[rel] = parse_source(self.files[rel].decode("utf-8"))
            except (SyntaxError, UnicodeDecodeError, ValueError, KeyError):
                self._trees[rel] = None
        return self._trees[rel]

    def module_file(self, name: str, level: int, importer: str) -> str | None:
        base = PurePosixPath(importer).parent
        if level:
            for _ in range(level - 1):
                base = base.parent
            parts = [*base.parts, *name.split(".")] if name else list(base.parts)
        else:
            parts = name.split(".")
        for candidate in ("/".join(parts) + ".py", "/".join(parts) + "/__init__.py"):
            if candidate in self.files:
                return candidate
        return None

    def resolves(self, rel: str, name: str) -> bool:
        """True unless every star import of ``rel`` is local and none of them exports ``name``."""
        tree = self.tree(rel)
        if tree is None:
            return True
        for node in _top_level(tree):
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                source = self.module_file(node.module or "", node.level, rel)
                exported = self.exports(source) if source else None
                if exported is None or name in exported:
                    return True
        return False

    def exports(self, rel: str) -> set[str] | None:
        if rel in self._cache:
            return self._cache[rel]
        self._cache[rel] = set()  # a cycle contributes nothing new
        tree = self.tree(rel)
        if tree is None:
            self._cache[rel] = None
            return None
        names: set[str] = set()
        declared: list[str] | None = None
        for node in _top_level(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    names |= _bound(target)
                    if isinstance(target, ast.Name) and target.id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
                        declared = [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            elif isinstance(node, ast.Import):
                names |= {(a.asname or a.name.split(".")[0]) for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name != "*":
                        names.add(alias.asname or alias.name)
                        continue
                    source = self.module_file(node.module or "", node.level, rel)
                    inner = self.exports(source) if source else None
                    if inner is None:
                        self._cache[rel] = None
                        return None
                    names |= inner
        result = set(declared) if declared is not None else {n for n in names if not n.startswith("_")}
        self._cache[rel] = result
        return result


def _top_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """Module-level statements, including those inside if/try/with/for blocks (not defs)."""
    stack = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While, ast.TryStar)):
            inner = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            for handler in getattr(node, "handlers", []):
                inner += handler.body
            stack.extend(reversed(inner))


def _bound(target: ast.AST) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        out: set[str] = set()
        for element in target.elts:
            out |= _bound(element)
        return out
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    return set()
