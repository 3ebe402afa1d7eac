"""Parsing and compiling Python source that the host did not write (generated or model-written).

CPython's parser and compiler answer deeply nested code (``-`` a hundred thousand times,
``a.b.b.b...``, ``1+1+1...``) with ``RecursionError`` or ``MemoryError`` instead of a
``SyntaxError``; an ``except SyntaxError`` then lets them escape a tool or a check and end
the call as an internal error. Every parse of such source goes through here, which turns
both into ``TooDeep``, a ``SyntaxError``, so every existing handler reports it as what it
is: code the checker cannot read, with a named reason.
"""

from __future__ import annotations

import ast
from types import CodeType

__all__ = ["TooDeep", "compile_source", "parse_source"]


class TooDeep(SyntaxError):
    """Source nested beyond what Python's parser or compiler can take."""

    code = "too_deeply_nested"

    def __init__(self, filename: str, cause: BaseException):
        stage = "compiler" if "compil" in str(cause) else "parser"
        super().__init__(f"code nests too deeply for Python's {stage} ({type(cause).__name__})")
        self.filename = filename


def parse_source(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse``; SyntaxError (``TooDeep`` included) when it cannot be parsed."""
    try:
        return ast.parse(source, filename=filename)
    except (RecursionError, MemoryError) as exc:
        raise TooDeep(filename, exc) from None


def compile_source(source: str | bytes | ast.Module, filename: str = "<unknown>") -> CodeType:
    """Bytecode for ``source`` (text or a parsed module); SyntaxError (``TooDeep`` included) otherwise."""
    try:
        return compile(source, filename, "exec", dont_inherit=True)
    except (RecursionError, MemoryError) as exc:
        raise TooDeep(filename, exc) from None
