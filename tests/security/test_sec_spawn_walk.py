"""One way to start a process: only the sandbox package spawns, everything else goes through it.

Walks every module of the product (``kernel_ext``, ``widgets``) as source (``ast``; nothing is
imported or run) and fails when a module outside ``kernel_ext/sandbox/`` starts a process by
any spelling: ``subprocess.*``, ``os.exec*``/``os.spawn*``/``os.posix_spawn*``/``os.system``/
``os.popen``/``os.fork*``, ``asyncio.create_subprocess_*`` (and a loop's ``subprocess_*``),
``pty.spawn``/``pty.fork``, ``multiprocessing`` and process pools; through aliases
(``import subprocess as sp``, ``from os import system as s``), ``getattr(os, "system")`` and
``importlib.import_module("subprocess")`` too. Code outside the package may not reach for the
package's raw spawn primitives either (``confined.spawn_confined``, ``supervisor.spawn``, ``Job``,
``tiers.launch``): it uses ``run_confined`` (one command) or ``WarmWorker`` (a long-lived worker).

The exceptions are named below, each with why it is safe: a trusted host program reading
data, never executing it. An exception that is no longer used fails the test too, so the list
only shrinks.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("kernel_ext", "widgets")
SANDBOX = "kernel_ext/sandbox/"

# (module, callee) -> why it may start a process without the sandbox. Keep it this short.
ALLOWED: dict[tuple[str, str], str] = {
    ("kernel_ext/hosting/export/apart.py", "asyncio.create_subprocess_exec"):
        "the server's own export builder (this package's code only, never the project's or a model's) in a child of "
        "the server, so its long C calls on a run's files hold no GIL the loop needs; the run folder comes as JSON data "
        "on stdin, the notebook back on stdout, bounded in time and size",
    ("kernel_ext/tools/search.py", "subprocess.run"):
        "ripgrep (a host binary, linear-time regex, --no-config --no-follow) reads workspace files from the folder the "
        "fence opened (cwd /proc/self/fd/N); it executes nothing, and its answer counts only if no folder changed meanwhile",
    ("kernel_ext/tools/syntax.py", "subprocess.run"):
        "node --check parses JavaScript from stdin and executes none of it",
    ("kernel_ext/validation/source_checks.py", "subprocess.run"):
        "ruff check --isolated parses Python source (no config, no plugins); it executes none of it",
    ("kernel_ext/tools/import_worker.py", "os.fork"):
        "the import guard's worker program: runs only inside the sandbox (WarmWorker), forks one child per check there",
    ("kernel_ext/validation/apphost/main.py", "os.fork"):
        "the app host's program: runs only inside the sandbox (WarmWorker), forks one child per scenario there",
    ("kernel_ext/pipeline/data/probe.py", "subprocess.Popen"):
        "a data file shipped into the generated project; never imported by the host, run only inside the sandbox shell",
}

SUBPROCESS = frozenset({"run", "call", "check_call", "check_output", "getoutput", "getstatusoutput", "Popen"})
OS = frozenset({
    "system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp",
    "execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe",
    "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe",
})
FORBIDDEN = frozenset(
    {f"subprocess.{n}" for n in SUBPROCESS} | {f"os.{n}" for n in OS} | {f"posix.{n}" for n in OS}
    | {"asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell",
       "asyncio.subprocess.create_subprocess_exec", "asyncio.subprocess.create_subprocess_shell",
       "pty.spawn", "pty.fork", "concurrent.futures.ProcessPoolExecutor",
       "kernel_ext.sandbox.supervisor.spawn", "kernel_ext.sandbox.supervisor.spawn_later",
       "kernel_ext.sandbox.supervisor.Job", "kernel_ext.sandbox.tiers.launch", "kernel_ext.sandbox.oneoff.execute",
       "kernel_ext.sandbox.spares.prepare", "kernel_ext.sandbox.confined.spawn_confined"}
)
# Whole modules whose every use starts processes.
FORBIDDEN_MODULES = ("multiprocessing",)
# Methods that start a process whatever object they are called on (an event loop).
FORBIDDEN_METHODS = frozenset({"subprocess_exec", "subprocess_shell"})
DYNAMIC_MODULES = frozenset({"subprocess", "pty", "multiprocessing", "posix", "_posixsubprocess"})


@dataclass(frozen=True)
class Use:
    module: str
    line: int
    callee: str


def _forbidden(dotted: str) -> bool:
    return dotted in FORBIDDEN or any(dotted == m or dotted.startswith(m + ".") for m in FORBIDDEN_MODULES)


class _Walker(ast.NodeVisitor):
    """Resolves names through the module's imports (any scope) and records process starts."""

    def __init__(self, module: str):
        self.module = module
        self.aliases: dict[str, str] = {}
        self.uses: list[Use] = []
        self._annotations: set[int] = set()

    def found(self, node: ast.AST, callee: str) -> None:
        self.uses.append(Use(self.module, getattr(node, "lineno", 0), callee))

    # -- imports bind names --------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.aliases[top] = top
            if any(alias.name == m or alias.name.startswith(m + ".") for m in FORBIDDEN_MODULES):
                self.found(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            base = self._relative(node.level, base)
        for alias in node.names:
            dotted = f"{base}.{alias.name}" if base else alias.name
            self.aliases[alias.asname or alias.name] = dotted
            if _forbidden(dotted) or _forbidden(base):
                self.found(node, dotted)

    def _relative(self, level: int, name: str) -> str:
        package = self.module.removesuffix(".py").split("/")[:-1]
        if level > 1:
            package = package[: len(package) - (level - 1)]
        return ".".join([*package, *([name] if name else [])])

    def bind_assignment(self, node: ast.Assign) -> None:
        """``sp = subprocess`` (or ``run = subprocess.run``) makes ``sp`` another spelling of it."""
        dotted = self.resolve(node.value)
        if dotted:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.aliases[target.id] = dotted

    # -- uses -----------------------------------------------------------------------------------

    def resolve(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if id(node) in self._annotations:
            return
        dotted = self.resolve(node)
        if dotted and _forbidden(dotted):
            self.found(node, dotted)
            return
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if id(node) in self._annotations:
            return
        dotted = self.aliases.get(node.id)
        if dotted and _forbidden(dotted) and isinstance(node.ctx, ast.Load):
            self.found(node, dotted)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in FORBIDDEN_METHODS:
            self.found(node, func.attr)
        target = self.resolve(func) or (func.id if isinstance(func, ast.Name) else "")
        literal = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if target in ("importlib.import_module", "__import__") and literal and literal[0].split(".")[0] in DYNAMIC_MODULES:
            self.found(node, f"{target}({literal[0]!r})")
        if target == "getattr" and len(node.args) >= 2 and literal:
            owner = self.resolve(node.args[0])
            if owner and _forbidden(f"{owner}.{literal[-1]}"):
                self.found(node, f"{owner}.{literal[-1]}")
        self.generic_visit(node)

    # -- annotations name types, they start nothing ------------------------------------------------

    def _skip(self, annotation: ast.AST | None) -> None:
        if annotation is not None:
            self._annotations.update(id(n) for n in ast.walk(annotation))

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._skip(node.annotation)
        self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> None:
        self._skip(node.annotation)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._skip(node.returns)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef


def uses_in(source: str, module: str) -> list[Use]:
    tree = ast.parse(source, filename=module)
    walker = _Walker(module)
    # Bind every import first (an import inside a function still names the same module).
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            walker.visit(node)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            walker.bind_assignment(node)
    walker.uses.clear()
    walker.visit(tree)
    return walker.uses


def product_modules() -> list[Path]:
    found = [p for top in PRODUCT for p in sorted((ROOT / top).rglob("*.py")) if "__pycache__" not in p.parts]
    assert len(found) > 100, f"the walk found only {len(found)} modules under {PRODUCT}: wrong root {ROOT}?"
    return found


def spawns_outside_the_sandbox() -> list[Use]:
    uses: list[Use] = []
    for path in product_modules():
        module = path.relative_to(ROOT).as_posix()
        if module.startswith(SANDBOX):
            continue
        uses += uses_in(path.read_text(encoding="utf-8"), module)
    return uses


def test_only_the_sandbox_package_starts_processes():
    unexplained = [u for u in spawns_outside_the_sandbox() if (u.module, u.callee) not in ALLOWED]
    assert not unexplained, "processes started outside kernel_ext/sandbox/ (use run_confined or WarmWorker):\n" + "\n".join(
        f"  {u.module}:{u.line}: {u.callee}" for u in unexplained)


def test_every_exception_is_still_needed_and_says_why():
    used = {(u.module, u.callee) for u in spawns_outside_the_sandbox()}
    stale = sorted(set(ALLOWED) - used)
    assert not stale, f"allowlisted but no longer used (remove them): {stale}"
    assert all(len(reason) > 20 for reason in ALLOWED.values())


# The walker itself can fail: every spelling below is one process start it must see.
SPELLINGS = {
    "plain call": ("import subprocess\nsubprocess.run(['x'])\n", "subprocess.run"),
    "module alias": ("import subprocess as sp\nsp.Popen(['x'])\n", "subprocess.Popen"),
    "from import": ("from subprocess import run\nrun(['x'])\n", "subprocess.run"),
    "from import alias": ("from subprocess import check_output as co\n", "subprocess.check_output"),
    "imported in a function": ("def f():\n    import subprocess\n    return subprocess.call(['x'])\n", "subprocess.call"),
    "reference, not call": ("import subprocess\nstarter = subprocess.Popen\n", "subprocess.Popen"),
    "module assigned": ("import subprocess\nsp = subprocess\nsp.run(['x'])\n", "subprocess.run"),
    "os.system": ("import os\nos.system('x')\n", "os.system"),
    "os alias exec": ("import os as o\no.execv('/bin/x', ['x'])\n", "os.execv"),
    "from os spawn": ("from os import spawnlp\n", "os.spawnlp"),
    "posix_spawn": ("import os\nos.posix_spawn('/bin/x', ['x'], {})\n", "os.posix_spawn"),
    "os.popen": ("import os\nos.popen('x')\n", "os.popen"),
    "os.fork": ("import os\nos.fork()\n", "os.fork"),
    "asyncio": ("import asyncio\nasyncio.create_subprocess_exec('x')\n", "asyncio.create_subprocess_exec"),
    "asyncio from": ("from asyncio import create_subprocess_shell as c\n", "asyncio.create_subprocess_shell"),
    "loop method": ("async def f(loop):\n    await loop.subprocess_exec(object, 'x')\n", "subprocess_exec"),
    "pty": ("import pty\npty.spawn(['x'])\n", "pty.spawn"),
    "multiprocessing": ("import multiprocessing\n", "multiprocessing"),
    "multiprocessing from": ("from multiprocessing import Process\n", "multiprocessing.Process"),
    "process pool": ("from concurrent.futures import ProcessPoolExecutor\n", "concurrent.futures.ProcessPoolExecutor"),
    "getattr": ("import os\ngetattr(os, 'system')('x')\n", "os.system"),
    "import_module": ("import importlib\nimportlib.import_module('subprocess')\n", "importlib.import_module('subprocess')"),
    "__import__": ("__import__('subprocess').run(['x'])\n", "__import__('subprocess')"),
    "raw sandbox primitive": ("from kernel_ext.sandbox.supervisor import spawn\n", "kernel_ext.sandbox.supervisor.spawn"),
    "raw sandbox launch": ("def f():\n    from kernel_ext.sandbox import tiers\n    return tiers.launch\n",
                           "kernel_ext.sandbox.tiers.launch"),
    "relative import": ("from ..sandbox.supervisor import Job\n", "kernel_ext.sandbox.supervisor.Job"),
    "raw confined spawn": ("from kernel_ext.sandbox.confined import spawn_confined\n", "kernel_ext.sandbox.confined.spawn_confined"),
}


@pytest.mark.parametrize("source,callee", list(SPELLINGS.values()), ids=list(SPELLINGS))
def test_the_walk_sees_every_spelling(source, callee):
    assert callee in {u.callee for u in uses_in(source, "kernel_ext/tools/example.py")}


def test_the_walk_leaves_harmless_uses_alone():
    harmless = (
        "import subprocess\nfrom kernel_ext.sandbox.oneoff import run_confined\n"
        "def f(p: subprocess.Popen) -> subprocess.CompletedProcess:\n"
        "    try:\n        run_confined(['x'], '.', 1)\n    except subprocess.TimeoutExpired:\n        pass\n"
        "    return subprocess.DEVNULL\n"
    )
    assert uses_in(harmless, "kernel_ext/tools/example.py") == []
