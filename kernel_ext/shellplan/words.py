"""A command line split into words the way the command policy reads it, in linear time.

The words are exactly those of ``shlex.shlex(command, posix=True, punctuation_chars=True)``
with ``whitespace_split`` on and no comment characters: quotes and backslashes decide what is
one word (POSIX rules, a backslash in double quotes escapes only ``"`` and ``\\``), a run of
``( ) ; < > | &`` is a word of its own, ``#`` is an ordinary character. ``shlex`` grows each
word one character at a time (``token += c``) and costs quadratic time on a long word: a
64 Ki-character word held the server for ~20 s. Here every word is read in runs (a regular
expression or ``str.find`` per run, no backtracking) and its pieces joined once.

Why not ``lexer``: ``sh_plan`` models what bash does (comments, redirections, ``$(...)``,
here-documents) for classification; the policy's contract is the simpler shlex word list that
its tests and callers pin. Both are linear; each has one job.
"""

from __future__ import annotations

import re

# A command line longer than this is refused before it is split, planned or run: every step is
# linear in the length, and this bounds that work (a card is prepared on the server's event loop).
MAX_COMMAND_CHARS = 65_536
WHITESPACE = " \t\r\n"
PUNCTUATION = "();<>|&"

_SPACES = re.compile(r"[ \t\r\n]+")
_PUNCTUATION_RUN = re.compile(r"[();<>|&]+")
_PLAIN_RUN = re.compile(r"[^ \t\r\n();<>|&'\"\\]+")
_DOUBLE_QUOTED_RUN = re.compile(r'[^"\\]*')


class SplitError(ValueError):
    """The command cannot be split (an open quote, a trailing backslash); says which, as shlex does."""


def split_words(command: str) -> list[str]:
    """``command``'s words (see the module docstring); ``SplitError`` if it cannot be split."""
    words: list[str] = []
    pieces: list[str] | None = None  # the word being read; None between words ('' is a word when quoted)
    i, n = 0, len(command)
    while i < n:
        c = command[i]
        if c in WHITESPACE or c in PUNCTUATION:
            if pieces is not None:
                words.append("".join(pieces))
                pieces = None
            run = (_SPACES if c in WHITESPACE else _PUNCTUATION_RUN).match(command, i)
            assert run is not None
            if c in PUNCTUATION:
                words.append(run.group())
            i = run.end()
            continue
        if pieces is None:
            pieces = []
        if c == "'":
            end = command.find("'", i + 1)
            if end < 0:
                raise SplitError("No closing quotation")
            pieces.append(command[i + 1 : end])
            i = end + 1
        elif c == '"':
            i = _double_quoted(command, i + 1, pieces)
        elif c == "\\":
            if i + 1 >= n:
                raise SplitError("No escaped character")
            pieces.append(command[i + 1])
            i += 2
        else:
            run = _PLAIN_RUN.match(command, i)
            assert run is not None
            pieces.append(run.group())
            i = run.end()
    if pieces is not None:
        words.append("".join(pieces))
    return words


def _double_quoted(command: str, i: int, pieces: list[str]) -> int:
    """Read a double-quoted part from ``i`` (after the opening quote); the index after its closing quote."""
    n = len(command)
    while True:
        run = _DOUBLE_QUOTED_RUN.match(command, i)
        assert run is not None
        pieces.append(run.group())
        i = run.end()
        if i >= n:
            raise SplitError("No closing quotation")
        if command[i] == '"':
            return i + 1
        if i + 1 >= n:  # a backslash last in the text
            raise SplitError("No escaped character")
        escaped = command[i + 1]
        pieces.append(escaped if escaped in '"\\' else "\\" + escaped)
        i += 2
