"""``check_syntax``: does a file parse? Python always; JSON always; JavaScript when Node is installed.

The file is read through the fence and its text handed to the checker (Node reads it from
stdin), so a checker never opens a workspace path itself. A file type without an available
checker is ``checker_unavailable``: a check that did not run is never reported as passing.
The edit tools' own gates live in ``edit_gates`` (gutter, elisions) and ``pysyntax``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from pydantic import Field

from kernel_ext import pyparse, safejson
from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.tools import pysyntax
from kernel_ext.tools.base import Category, ToolArgs, ToolContext, ToolOutcome, ToolSpec
from kernel_ext.tools.files_common import FILE_SERVICES, load_text, locate

NODE_TIMEOUT = 20.0
_JS = {".js": ("commonjs", "module"), ".cjs": ("commonjs",), ".mjs": ("module",)}


class CheckSyntaxArgs(ToolArgs):
    path: str = Field(description="File to check (Python, JSON, or JavaScript when Node.js is installed).")


def check_text(text: str, path: str) -> tuple[str, str]:
    """(checker name, error or ''); raises ``checker_unavailable`` for unsupported types."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix in (".py", ".pyi"):
        try:
            pyparse.check_size(text, path)
        except pyparse.TooLarge as exc:
            raise ToolFailure(ErrorCode.TOO_LARGE, f"{path}: {exc.msg}; it was not checked", {"path": path, "reason": exc.code}) from None
        return "python compile", pysyntax.compiles(text, path)
    if suffix == ".json":
        try:
            safejson.loads(text, max_depth=None)  # only checked, never walked: the parser's own limit
        except safejson.JsonTooDeep as exc:
            raise ToolFailure(ErrorCode.TOO_LARGE, f"{path}: {exc}; it was not checked", {"path": path, "reason": exc.code}) from None
        except json.JSONDecodeError as exc:
            return "json", f"{exc.msg} (line {exc.lineno}, column {exc.colno})"
        except ValueError as exc:
            return "json", str(exc)[:200]
        return "json", ""
    if suffix in _JS:
        node = shutil.which("node")
        if node is None:
            raise ToolFailure(ErrorCode.CHECKER_UNAVAILABLE,
                              f"no JavaScript checker: Node.js is not installed, so {path!r} was not checked")
        errors = [_node_check(node, text, kind) for kind in _JS[suffix]]
        return "node --check", "" if "" in errors else errors[0]
    raise ToolFailure(
        ErrorCode.CHECKER_UNAVAILABLE,
        f"no syntax checker for {suffix or 'files without an extension'} here (Python, JSON and JavaScript are "
        f"checked); {path!r} was not checked",
    )


def _node_check(node: str, text: str, input_type: str) -> str:
    try:
        proc = subprocess.run(
            [node, "--check", f"--input-type={input_type}", "-"],
            input=text.encode("utf-8"),
            check=False,
            capture_output=True,
            timeout=NODE_TIMEOUT,
            env={"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"},
            cwd="/",
        )
    except subprocess.TimeoutExpired:
        return f"node --check did not finish within {NODE_TIMEOUT:g} s"
    if proc.returncode == 0:
        return ""
    lines = [line for line in proc.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    where = next((line for line in lines if line.startswith("[stdin]:")), "")
    message = next((line for line in lines if "Error" in line), lines[-1] if lines else "syntax error")
    return f"{message} ({where.replace('[stdin]:', 'line ')})" if where else message


def _check_syntax(args: CheckSyntaxArgs, ctx: ToolContext) -> ToolOutcome:
    loc = locate(ctx, args.path)
    loaded = load_text(ctx, loc)
    checker, error = check_text(loaded.text, loc.display)
    if error:
        raise ToolFailure(ErrorCode.SYNTAX_ERROR, f"{loc.display}: {error}", {"path": loc.display, "checker": checker, "error": error})
    return ToolOutcome(f"{loc.display}: no syntax errors ({checker})", {"path": loc.display, "checker": checker, "valid": True})


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="check_syntax",
        category=Category.READ,
        args_model=CheckSyntaxArgs,
        description="Check that a file parses (Python; JSON; JavaScript when Node.js is available).",
        run=_check_syntax,
        requires=FILE_SERVICES,
    ),
)
