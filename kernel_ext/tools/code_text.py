"""The code of a line, without its comments: what a checklist citation is compared on.

A citation proves work only through code. ``code_lines`` gives each line of a file its code part
(comments removed, whitespace collapsed; a comment-only or blank line is ``""``), by the comment
syntax of the file's kind: ``#`` (Python, shell, TOML, YAML, requirements), ``//`` and ``/* */``
(JavaScript, TypeScript, CSS, Java, Go, Rust, ...), ``--`` and ``/* */`` (SQL), ``<!-- -->``
(HTML, XML, Vue, Svelte, Markdown). Quotes are tracked within a line (a ``#`` in a string is
code), block comments and Python's triple-quoted strings across lines. Any other kind of file
has no comments: all of its text is content. The same reading serves a file and a quote.

``meaningful`` is the floor a citation must reach: at least ``MIN_WORDS`` words (identifiers,
numbers) with ``MIN_WORD_CHARS`` word characters among them, so ``}``, ``pass``, ``return`` or
``x = 1`` alone prove nothing.
"""

from __future__ import annotations

import re
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
    syntax = syntax_for(path)
    out: list[str] = []
    state = ""  # "" (code), the block comment's closer, or an open triple quote
    specials = syntax.specials
    for line in text.split("\n"):
        code, state = _strip(line, syntax, state, specials)
        out.append(" ".join(code.split()))
    return out


def _strip(line: str, syntax: Syntax, state: str, specials: str) -> tuple[str, str]:
    """The code of one line and the state carried to the next (linear in the line)."""
    if not state and not any(ch in line for ch in specials):
        return line, state  # nothing that opens a string or a comment: all of it is code
    kept: list[str] = []
    i, n = 0, len(line)
    quote = ""
    while i < n:
        if state:  # inside a block comment (dropped) or a triple-quoted string (kept)
            end = line.find(state, i)
            stop = n if end < 0 else end + len(state)
            if state in ('"""', "'''"):
                kept.append(line[i:stop])
            i, state = stop, (state if end < 0 else "")
            continue
        ch = line[i]
        if quote:
            kept.append(ch)
            if ch == "\\" and i + 1 < n:
                kept.append(line[i + 1])
                i += 2
                continue
            quote = "" if ch == quote else quote
            i += 1
            continue
        if syntax.triple and line.startswith(('"""', "'''"), i):
            state = line[i:i + 3]
            kept.append(state)
            i += 3
            continue
        if ch in syntax.quotes:
            quote = ch
            kept.append(ch)
            i += 1
            continue
        if any(line.startswith(marker, i) for marker in syntax.line):
            break
        if syntax.block is not None and line.startswith(syntax.block[0], i):
            state = syntax.block[1]
            i += len(syntax.block[0])
            kept.append(" ")
            continue
        kept.append(ch)
        i += 1
    return "".join(kept), state


def quote_code(path: str, quote: str) -> str:
    """A quote read as a fragment of ``path``'s kind: its code lines joined by one space."""
    return " ".join(line for line in code_lines(path, quote) if line)


def meaningful(code: str) -> bool:
    words = _WORD.findall(code)
    return len(words) >= MIN_WORDS and sum(len(w) for w in words) >= MIN_WORD_CHARS
