"""Parse a Python model file one top-level statement at a time.

``ast.parse`` is C code that holds the GIL for as long as it runs (about half a second for a
300 KB file), so even in a worker thread one big parse stalls the server's event loop. Here
the file is split at top-level statement boundaries with ``tokenize`` (pure Python: the GIL
changes hands between its steps), and each statement, at most ``MAX_STATEMENT_CHARS``, is
parsed on its own; line numbers are those of the file.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterator

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.pyparse import one_tree_at_a_time

MAX_STATEMENT_CHARS = 64 * 1024
_CONTINUATIONS = frozenset({"else", "elif", "except", "finally"})
_SKIPPED = frozenset({tokenize.NL, tokenize.COMMENT, tokenize.ENCODING})


def parse_statements(text: str, source: str) -> ast.Module:
    """The module ``ast.parse(text)`` would give, parsed statement by statement."""
    return ast.Module(body=list(iter_statements(text, source)), type_ignores=[])


def iter_statements(text: str, source: str) -> Iterator[ast.stmt]:
    """The top-level statements of ``text``, each parsed when it is asked for (so a caller that
    evaluates as it goes never holds the whole tree: fewer long-lived objects, shorter GC pauses)."""
    lines = text.splitlines(keepends=True)
    try:
        starts = _statement_starts(text)
    except (tokenize.TokenError, SyntaxError) as exc:
        line = getattr(exc, "lineno", None) or (exc.args[1][0] if len(exc.args) > 1 else "?")
        raise ToolFailure(ErrorCode.NOT_A_MODEL, f"{source} is not valid Python: line {line}: {exc.args[0]}") from None
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(lines) + 1
        chunk = "".join(lines[start - 1:end - 1])
        if len(chunk) > MAX_STATEMENT_CHARS:
            raise ToolFailure(
                ErrorCode.TOO_LARGE,
                f"{source} line {start}: a statement longer than {MAX_STATEMENT_CHARS} characters; "
                "a model file builds its model in many short statements",
            )
        try:
            with one_tree_at_a_time():  # pyparse.AST_LOCK says why
                tree = ast.parse(chunk, filename=source)
        except SyntaxError as exc:
            line = (exc.lineno or 1) + start - 1
            raise ToolFailure(ErrorCode.NOT_A_MODEL, f"{source} is not valid Python: line {line}: {exc.msg}") from None
        except (ValueError, RecursionError, MemoryError) as exc:  # null bytes; nesting the parser cannot hold
            raise ToolFailure(ErrorCode.NOT_A_MODEL, f"{source} line {start} could not be parsed: {type(exc).__name__}") from None
        ast.increment_lineno(tree, start - 1)
        yield from tree.body


def _statement_starts(text: str) -> list[int]:
    """Line numbers (1-based) where a top-level statement begins."""
    starts: list[int] = []
    depth = 0
    at_line_start = True
    decorated = False
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        kind = token.type
        if kind == tokenize.INDENT:
            depth += 1
        elif kind == tokenize.DEDENT:
            depth -= 1
        elif kind == tokenize.NEWLINE:
            at_line_start = True
        elif kind == tokenize.ENDMARKER:
            break
        elif kind not in _SKIPPED and at_line_start:
            at_line_start = False
            continues = kind == tokenize.NAME and token.string in _CONTINUATIONS
            if depth == 0 and not continues and not decorated:
                starts.append(token.start[0])
            decorated = depth == 0 and token.string == "@"
    return starts
