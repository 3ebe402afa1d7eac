"""The code of a line, without its comments: what a checklist citation is compared on.

A citation proves work only through code. ``code_lines`` gives each line of a file its code part
(comments removed, whitespace collapsed; a comment-only or blank line is ``""``), by the comment
syntax of the file's kind: ``#`` (Python, shell, TOML, YAML, requirements), ``//`` and ``/* */``
(JavaScript, TypeScript, CSS, Java, Go, Rust, ...), ``--`` and ``/* */`` (SQL), ``<!-- -->``
(HTML, XML, Vue, Svelte, Markdown). Quotes are tracked within a line (a ``#`` in a string is
code), block comments and Python's triple-quoted strings across lines. Any other kind of file
has no comments: all of its text is content. Only a whole file is read this way: a quote is
located in the file's text and judged by the code mask of what it covers (``quote_spans``), so
a ``/*`` inside a string of the file cannot hide the rest of a quote.

``meaningful`` is the floor a citation must reach: at least ``MIN_WORDS`` words (identifiers,
numbers) with ``MIN_WORD_CHARS`` word characters among them, so ``}``, ``pass``, ``return`` or
``x = 1`` alone prove nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

MIN_WORDS = 2
MIN_WORD_CHARS = 6
_WORD = re.compile(r"\w+")

HASH = {".py", ".pyi", ".sh", ".bash", ".toml", ".yaml", ".yml", ".cfg", ".ini", ".txt", ".env", ".conf", ".r"}
HASH_NAMES = {"dockerfile", "makefile", "procfile", ".gitignore", ".dockerignore", ".env"}
C_LIKE = {".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".css", ".scss", ".less", ".java", ".kt", ".kts", ".go", ".rs",
          ".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".swift", ".dart", ".scala", ".php", ".json5", ".jsonc"}
SQL = {".sql"}
MARKUP = {".html", ".htm", ".xml", ".vue", ".svelte", ".md", ".svg"}


@dataclass(frozen=True)
class Syntax:
    line: tuple[str, ...] = ()  # markers that end a line's code
    block: tuple[str, str] | None = None  # (open, close) of a block comment
    triple: bool = False  # Python's triple-quoted strings span lines
    quotes: str = "\"'"

    @property
    def specials(self) -> str:
        """The characters that may open a string or a comment."""
        opener = self.block[0][:1] if self.block else ""
        return self.quotes + "".join(marker[:1] for marker in self.line) + opener


NONE = Syntax(quotes="")
SYNTAXES = {
    "hash": Syntax(line=("#",), triple=True),
    "c": Syntax(line=("//",), block=("/*", "*/"), quotes="\"'`"),
    "sql": Syntax(line=("--",), block=("/*", "*/"), quotes="'\""),
    "markup": Syntax(block=("<!--", "-->"), quotes=""),
}


def syntax_for(path: str) -> Syntax:
    name = path.rsplit("/", 1)[-1].lower()
    suffix = name[name.rfind("."):] if "." in name else ""
    if name in HASH_NAMES or suffix in HASH:
        return SYNTAXES["hash"]
    for kind, suffixes in (("c", C_LIKE), ("sql", SQL), ("markup", MARKUP)):
        if suffix in suffixes:
            return SYNTAXES[kind]
    return NONE


def code_lines(path: str, text: str) -> list[str]:
    """One entry per line of ``text`` (split on ``\\n``): its code, whitespace collapsed."""
    return [" ".join("".join(ch if keep else " " for ch, keep in zip(line, mask, strict=True)).split())
            for line, mask in zip(text.split("\n"), code_masks(path, text), strict=True)]


def code_masks(path: str, text: str) -> list[list[bool]]:
    """Per line of ``text``, per character: is it code (True) or comment (False)?

    The file is read as a whole, so a string or block comment carried from an earlier line is
    seen in context; a quote is then judged by the mask of the lines it lands on, never read alone.
    """
    syntax = syntax_for(path)
    out: list[list[bool]] = []
    state = ""  # "" (code), the block comment's closer, or an open triple quote
    specials = syntax.specials
    for line in text.split("\n"):
        mask, state = _mask(line, syntax, state, specials)
        out.append(mask)
    return out


def _mask(line: str, syntax: Syntax, state: str, specials: str) -> tuple[list[bool], str]:
    """The code mask of one line and the state carried to the next (linear in the line)."""
    n = len(line)
    if not state and not any(ch in line for ch in specials):
        return [True] * n, state  # nothing that opens a string or a comment: all of it is code
    mask = [True] * n
    i = 0
    quote = ""
    while i < n:
        if state:  # inside a block comment (dropped) or a triple-quoted string (kept)
            end = line.find(state, i)
            stop = n if end < 0 else end + len(state)
            if state not in ('"""', "'''"):
                mask[i:stop] = [False] * (stop - i)
            i, state = stop, (state if end < 0 else "")
            continue
        ch = line[i]
        if quote:
            if ch == "\\" and i + 1 < n:
                i += 2
                continue
            quote = "" if ch == quote else quote
            i += 1
            continue
        if syntax.triple and line.startswith(('"""', "'''"), i):
            state = line[i:i + 3]
            i += 3
            continue
        if ch in syntax.quotes:
            quote = ch
            i += 1
            continue
        if any(line.startswith(marker, i) for marker in syntax.line):
            mask[i:] = [False] * (n - i)
            break
        if syntax.block is not None and line.startswith(syntax.block[0], i):
            state = syntax.block[1]
            mask[i:i + len(syntax.block[0])] = [False] * len(syntax.block[0])
            i += len(syntax.block[0])
            continue
        i += 1
    return mask, state


MAX_OCCURRENCES = 10_000  # a short quote in a large file: the search stops here


@dataclass(frozen=True)
class QuoteSpan:
    """One place a quote occurs in a file: the code it covers and the file lines that code is on."""

    code: str  # the file's code inside the quote, whitespace collapsed (comments dropped)
    lines: frozenset[int]  # indices of the file lines whose code the quote covers


def quote_spans(path: str, text: str, quote: str) -> Iterator[QuoteSpan]:
    """Where ``quote`` occurs in ``text`` (whitespace-normalised: runs of spaces and line breaks are
    one space), each occurrence judged by the file's own code mask. Linear per occurrence; at most
    ``MAX_OCCURRENCES`` are looked at."""
    needle = " ".join(quote.split())
    if not needle:
        return
    chars: list[str] = []
    line_of: list[int] = []
    is_code: list[bool] = []
    for index, (line, mask) in enumerate(zip(text.split("\n"), code_masks(path, text), strict=True)):
        pending_space = bool(chars)  # a line break is whitespace between the lines' words
        for ch, keep in zip(line, mask, strict=True):
            if ch.isspace():
                pending_space = pending_space or bool(chars)
                continue
            if pending_space:
                chars.append(" ")
                line_of.append(index)
                is_code.append(False)
                pending_space = False
            chars.append(ch)
            line_of.append(index)
            is_code.append(keep)
    haystack = "".join(chars)
    position, seen = haystack.find(needle), 0
    while position >= 0 and seen < MAX_OCCURRENCES:
        span = range(position, position + len(needle))
        code = " ".join("".join(haystack[k] if is_code[k] else " " for k in span).split())
        yield QuoteSpan(code, frozenset(line_of[k] for k in span if is_code[k]))
        position, seen = haystack.find(needle, position + 1), seen + 1


def meaningful(code: str) -> bool:
    words = _WORD.findall(code)
    return len(words) >= MIN_WORDS and sum(len(w) for w in words) >= MIN_WORD_CHARS
