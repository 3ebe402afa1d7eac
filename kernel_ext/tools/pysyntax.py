"""The Python syntax gate: refuse an edit that breaks a file that compiled before.

Compiling a 2,000-line module costs about 10 ms here, more than the whole edit budget, so
the gate works on the changed region when it can. A valid module is a sequence of top-level
statements; cutting it where a top-level statement starts leaves pieces that are valid on
their own (the tokenizer is at column 0, no bracket or string open). So when an edit falls
inside the chunk ``[start of its top-level statement, line before the next one]``, the new
file is valid if the new chunk compiles alone. The statement starts of every version are
cached by content digest, and a passing edit derives the new version's starts from the old
ones, so a run of edits on one file never parses the whole file again.

Whenever the shortcut does not apply (no cached starts for an unseen version, a chunk that
touches ``__future__`` imports, an encoding line or a module-level ``global``, or a chunk that
fails alone) the whole file is compiled: the shortcut can only say "valid", never "broken".
"""

from __future__ import annotations

import ast
import bisect
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

from kernel_ext.pyparse import compile_source, parse_source
from kernel_ext.workspace import sha256_hex

_CACHE_SIZE = 128
_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=]")
_MODULE_GLOBAL = re.compile(r"^(global|nonlocal)\b", re.MULTILINE)


@dataclass(frozen=True)
class Info:
    valid: bool
    starts: tuple[int, ...] = ()  # 1-based lines where top-level statements start
    error: str = ""


_cache: OrderedDict[str, Info] = OrderedDict()  # content-addressed, so shared by every run
_cache_lock = threading.Lock()


def _cached(sha: str) -> Info | None:
    with _cache_lock:
        return _cache.get(sha)


def _remember(sha: str, info: Info) -> Info:
    with _cache_lock:
        _cache[sha] = info
        _cache.move_to_end(sha)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return info


def analyse(text: str, filename: str, sha: str | None = None) -> Info:
    """Parse the whole module once per version (cached by digest) and note its statement starts."""
    key = sha or sha256_hex(text.encode("utf-8"))
    cached = _cached(key)
    if cached is not None:
        return cached
    try:
        tree = parse_source(text, filename)
    except (SyntaxError, ValueError) as exc:
        return _remember(key, Info(False, (), describe(exc)))
    return _remember(key, Info(True, statement_starts(tree.body)))


def statement_starts(body: list[ast.stmt], offset: int = 0) -> tuple[int, ...]:
    """Lines where a top-level statement begins on a line of its own (decorators included)."""
    starts: list[int] = []
    previous_end = 0
    for node in body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        if first > previous_end:
            starts.append(first + offset)
        previous_end = max(previous_end, node.end_lineno or node.lineno)
    return tuple(starts)


def describe(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError) and exc.lineno is None:
        return str(exc.msg)
    if isinstance(exc, SyntaxError):
        where = f"line {exc.lineno}" + (f", column {exc.offset}" if exc.offset else "")
        text = (exc.text or "").strip()
        return f"{exc.msg} ({where})" + (f": {text[:120]}" if text else "")
    return str(exc)


def compiles(text: str, filename: str) -> str:
    """'' when ``text`` compiles to bytecode, else the error description."""
    try:
        compile_source(text, filename)
    except (SyntaxError, ValueError) as exc:
        return describe(exc)
    return ""


def regression(
    old_lines: list[str],
    new_lines: list[str],
    filename: str,
    *,
    old_sha: str,
    new_sha: str,
    edit: tuple[int, int, int] | None = None,
) -> str:
    """'' when the edit is acceptable; else why it breaks a module that compiled before.

    ``edit`` = (first, last, count): old lines ``first..last`` (1-based, inclusive; ``last`` may
    be ``first - 1`` for a pure insertion) were replaced by ``count`` new lines.
    """
    old = _cached(old_sha) or analyse("".join(old_lines), filename, old_sha)
    if not old.valid:
        return ""  # nothing to regress from: a broken file may be fixed step by step
    if edit is not None and old.starts:
        fast = _chunk_check(old, old_lines, new_lines, filename, new_sha, edit)
        if fast:
            return ""
    new_text = "".join(new_lines)
    try:  # one parse serves both the verdict and the new version's statement starts
        tree = parse_source(new_text, filename)
        compile_source(tree, filename)
    except (SyntaxError, ValueError) as exc:
        error = describe(exc)
    else:
        _remember(new_sha, Info(True, statement_starts(tree.body)))
        return ""
    if compiles("".join(old_lines), filename):
        return ""  # the old version did not compile either (an error only bytecode compile sees)
    return error


def _chunk_check(old: Info, old_lines: list[str], new_lines: list[str], filename: str, new_sha: str, edit: tuple[int, int, int]) -> bool:
    first, last, count = edit
    starts = old.starts
    i = bisect.bisect_right(starts, first) - 1
    chunk_start = starts[i] if i >= 0 else 1
    if last < first and chunk_start == first:
        # A pure insertion right before a statement joins the chunk above it (a method added
        # at the end of a class is indented: it continues the class, not the next statement).
        chunk_start = starts[i - 1] if i > 0 else 1
    j = bisect.bisect_right(starts, last)
    chunk_end = starts[j] - 1 if j < len(starts) else len(old_lines)
    delta = count - (last - first + 1)
    new_end = chunk_end + delta
    if chunk_start <= 2 and any(_CODING.match(line) for line in new_lines[:2]):
        return False
    chunk = "".join(new_lines[chunk_start - 1 : new_end])
    if "__future__" in chunk or _MODULE_GLOBAL.search(chunk):
        return False
    try:
        tree = parse_source(chunk, filename)
        compile_source(tree, filename)
    except (SyntaxError, ValueError):
        return False
    before = [s for s in starts if s < chunk_start]
    inside = list(statement_starts(tree.body, chunk_start - 1))
    if not inside or inside[0] != chunk_start:
        inside = [chunk_start, *[s for s in inside if s > chunk_start]] if chunk.strip() else []
    after = [s + delta for s in starts[j:]]
    _remember(new_sha, Info(True, tuple(before + inside + after)))
    return True
