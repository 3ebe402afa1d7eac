"""Parsing and compiling Python source that the host did not write (generated or model-written).

CPython's parser and compiler answer deeply nested code (``-`` a hundred thousand times,
``a.b.b.b...``, ``1+1+1...``) with ``RecursionError`` or ``MemoryError`` instead of a
``SyntaxError``; an ``except SyntaxError`` then lets them escape a tool or a check and end
the call as an internal error. Every parse of such source goes through here, which turns
both into ``TooDeep``, a ``SyntaxError``, so every existing handler reports it as what it
is: code the checker cannot read, with a named reason.

Size is bounded too: a parse costs the host about 250 bytes of memory per byte of source in
the worst shape (``x=1+1+1...``: 1 MiB took 280 MB, 6 MB took 1.4 GB), so source over
``MAX_SOURCE_BYTES`` is not parsed at all: ``TooLarge``, also a ``SyntaxError``. Generator
output (Phase 1's check, shaped by BESSER's templates) passes its own, larger bound.
"""

from __future__ import annotations

import ast
import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import CodeType

__all__ = ["MAX_SOURCE_BYTES", "TooDeep", "TooLarge", "check_size", "compile_source", "one_tree_at_a_time", "parse_source"]

MAX_SOURCE_BYTES = 1024 * 1024


class TooDeep(SyntaxError):
    """Source nested beyond what Python's parser or compiler can take."""

    code = "too_deeply_nested"

    def __init__(self, filename: str, cause: BaseException):
        stage = "compiler" if "compil" in str(cause) else "parser"
        super().__init__(f"code nests too deeply for Python's {stage} ({type(cause).__name__})")
        self.filename = filename


class TooLarge(SyntaxError):
    """Source larger than the host parses."""

    code = "too_large"

    def __init__(self, filename: str, size: int, limit: int):
        super().__init__(f"{size} bytes of source is more than the {limit} the host parses")
        self.filename = filename
        self.size = size
        self.limit = limit


def check_size(source: str | bytes, filename: str = "<unknown>", max_bytes: int | None = MAX_SOURCE_BYTES) -> None:
    """``TooLarge`` when ``source`` is over ``max_bytes`` (None: no bound)."""
    if max_bytes is None or len(source) <= max_bytes // 4:
        return  # four bytes a character at most: no need to encode
    size = len(source) if isinstance(source, bytes) else len(source.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise TooLarge(filename, size, max_bytes)


# CPython 3.11 keeps the AST converter's recursion depth per interpreter, not per thread. The converter
# is C code and keeps the GIL unless a collection runs Python code in the middle of it (a gc callback,
# a finalizer, a weakref callback); another thread may then convert a tree of its own (the traceback
# module parses every line it underlines with carets) and this conversion ends in "SystemError: AST
# constructor recursion depth mismatch" (seen once in 30 runs at once, from a traceback logged by
# another run). So every tree the host makes or compiles is made under one lock with the collector
# paused: nothing runs Python code in the middle, and trees the host makes never meet each other.
AST_LOCK = threading.Lock()


@contextmanager
def one_tree_at_a_time() -> Iterator[None]:
    """Hold this around any conversion between source, trees and bytecode (``ast.parse``, ``compile``)."""
    with AST_LOCK:
        was_enabled = gc.isenabled()
        gc.disable()  # the nodes made here are all alive until the end: a collection would only cost time
        try:
            yield
        finally:
            if was_enabled:
                gc.enable()


def parse_source(source: str | bytes, filename: str = "<unknown>", max_bytes: int | None = MAX_SOURCE_BYTES,
                 *, top_level_await: bool = False) -> ast.Module:
    """``ast.parse``; SyntaxError (``TooDeep``, ``TooLarge`` included) when it cannot be parsed.
    ``top_level_await``: a notebook cell's source (``await`` outside a function is allowed there)."""
    check_size(source, filename, max_bytes)
    flags = ast.PyCF_ONLY_AST | (ast.PyCF_ALLOW_TOP_LEVEL_AWAIT if top_level_await else 0)
    try:
        with one_tree_at_a_time():
            tree: ast.Module = compile(source, filename, "exec", flags=flags, dont_inherit=True)
            return tree
    except (RecursionError, MemoryError) as exc:
        raise TooDeep(filename, exc) from None


def compile_source(source: str | bytes | ast.Module, filename: str = "<unknown>", max_bytes: int | None = MAX_SOURCE_BYTES) -> CodeType:
    """Bytecode for ``source`` (text or a parsed module); SyntaxError (``TooDeep``, ``TooLarge`` included) otherwise."""
    if not isinstance(source, ast.Module):
        check_size(source, filename, max_bytes)
    try:
        with one_tree_at_a_time():
            return compile(source, filename, "exec", dont_inherit=True)
    except (RecursionError, MemoryError) as exc:
        raise TooDeep(filename, exc) from None
