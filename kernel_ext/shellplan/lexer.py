"""Splitting a shell command line the way a shell would, for static classification only.

``sh_plan`` must see what a shell sees: quotes decide what is one word, ``&&``/``||``/``;``/
``|``/``&``/newline end a segment, and anything the shell would compute at run time
(``$(...)``, backticks, process substitution, unquoted globs, variables) is marked, not
evaluated. Substitutions and subshell groups keep their inner text so the classifier can look
inside them (a destructive verb never hides in ``$(...)``). Nothing here runs anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SEGMENT_OPS = ("&&", "||", ";;", "|&", ";", "|", "&")
REDIRECT_OPS = ("&>>", "&>", "<<<", "<<-", "<<", ">>", ">|", ">&", "<&", "<>", ">", "<")
_NAME_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_SPECIAL_VARS = set("@*#?$!-0123456789")
_WORD_BREAK = re.compile(r"[ \t\n;&|<>()]")
_OPERATOR_START = frozenset(op[0] for op in (*SEGMENT_OPS, *REDIRECT_OPS))
_GLOB_START = frozenset("*?[{")
_PLAIN_RUN = re.compile(r"[^ \t\n\\'\"`$<>;&|()*?\[{]+")  # characters with no meaning inside a word


@dataclass
class Word:
    """One shell word: ``text`` with quotes removed; flags for what only run time decides."""

    text: str = ""
    raw: str = ""
    quoted: bool = False
    glob: bool = False
    var: bool = False
    subs: list[str] = field(default_factory=list)

    @property
    def dynamic(self) -> bool:
        return self.glob or self.var or bool(self.subs)


@dataclass
class Redirect:
    op: str
    fd: str = ""
    target: Word | None = None


@dataclass
class Segment:
    """A simple command between two top-level operators; ``op`` is the operator after it."""

    words: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)  # inner text of ``( ... )`` subshells
    heredocs: list[str] = field(default_factory=list)
    op: str = ""

    @property
    def empty(self) -> bool:
        return not (self.words or self.redirects or self.groups)


@dataclass
class Parsed:
    segments: list[Segment]
    problem: str = ""  # unterminated quote, unbalanced parenthesis: the command is undecidable


class _Pieces:
    """The word being read: its pieces are joined once when it ends (a long word costs linear work)."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.raw: list[str] = []
        self.quoted = self.glob = self.var = False
        self.subs: list[str] = []

    def build(self) -> Word:
        return Word("".join(self.text), "".join(self.raw), self.quoted, self.glob, self.var, self.subs)


class _Lexer:
    def __init__(self, text: str):
        self.s = text
        self.i = 0
        self.segments: list[Segment] = []
        self.seg = Segment()
        self.word: _Pieces | None = None
        self.pending_redirect: Redirect | None = None
        self.pending_heredocs: list[tuple[str, bool, Segment]] = []
        self.problem = ""
        # lookahead caches, so a word full of '[' or '{' costs linear work, not quadratic
        self._end_from = self._end_at = -1
        self._next: dict[str, int] = {}

    # -- words and segments --------------------------------------------------------------

    def _w(self) -> _Pieces:
        if self.word is None:
            self.word = _Pieces()
        return self.word

    def end_word(self) -> None:
        pieces, self.word = self.word, None
        if pieces is None:
            return
        word = pieces.build()
        if self.pending_redirect is not None:
            self.pending_redirect.target = word
            self.seg.redirects.append(self.pending_redirect)
            if self.pending_redirect.op in ("<<", "<<-"):
                self.pending_heredocs.append((word.text, self.pending_redirect.op == "<<-", self.seg))
            self.pending_redirect = None
            return
        self.seg.words.append(word)

    def end_segment(self, op: str) -> None:
        self.end_word()
        if self.pending_redirect is not None:
            self.seg.redirects.append(self.pending_redirect)
            self.pending_redirect = None
            self.problem = self.problem or "a redirection without a target"
        self.seg.op = op
        if not self.seg.empty:
            self.segments.append(self.seg)
        elif op in ("&&", "||", "|", "|&") and not self.problem:
            self.problem = f"{op!r} without a command before it"
        self.seg = Segment()

    # -- scanning -------------------------------------------------------------------------

    def run(self) -> Parsed:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t":
                self.end_word()
                self.i += 1
            elif c == "\n":
                self.end_segment("\n")
                self.i += 1
                self._heredoc_bodies()
            elif c == "#" and self.word is None:
                while self.i < len(s) and s[self.i] != "\n":
                    self.i += 1
            elif c in "\\'\"`$":
                start = self.i
                word = self._w()
                if c == "\\":
                    self._escape()
                elif c == "'":
                    self._single()
                elif c == '"':
                    self._double()
                else:
                    self._expansion(word, c)
                word.raw.append(s[start : self.i])
            elif c in "<>" and s.startswith("(", self.i + 1) and self.word is None:
                inner = self._balanced(self.i + 2, "(", ")")
                word = self._w()
                word.subs.append(inner)
                word.raw.append(c + "(" + inner + ")")
            elif c in _OPERATOR_START and self._operator():
                continue
            elif c == "(" and self.word is None:
                inner = self._balanced(self.i + 1, "(", ")")
                self.seg.groups.append(inner)
            elif c == ")":
                self.problem = self.problem or "an unbalanced ')'"
                self.i += 1
            elif c not in _GLOB_START:  # a run of plain characters, taken at once
                run = _PLAIN_RUN.match(s, self.i)
                end = self.i + 1 if run is None else run.end()  # a '(' inside a word is one character
                word = self._w()
                word.text.append(s[self.i : end])
                word.raw.append(s[self.i : end])
                self.i = end
            else:
                word = self._w()
                if c in "*?" or (c == "[" and self._later_in_word("]")):
                    word.glob = True
                elif c == "{" and self._later_in_word(",") and self._later_in_word("}"):
                    word.glob = True  # brace expansion: the words only exist after expansion
                word.text.append(c)
                word.raw.append(c)
                self.i += 1
        self.end_segment("")
        if self.pending_heredocs:
            self.problem = self.problem or "a here-document without its body"
        return Parsed(self.segments, self.problem)

    def _word_end(self) -> int:
        """Where the unquoted run of characters under ``self.i`` ends (every position in it shares the answer)."""
        if not self._end_from <= self.i <= self._end_at:
            found = _WORD_BREAK.search(self.s, self.i)
            self._end_from, self._end_at = self.i, len(self.s) if found is None else found.start()
        return self._end_at

    def _later_in_word(self, char: str) -> bool:
        """Whether ``char`` occurs after ``self.i`` before the word ends (next occurrence cached)."""
        at = self._next.get(char, -1)
        if at <= self.i:
            found = self.s.find(char, self.i + 1)
            at = self._next[char] = len(self.s) if found < 0 else found
        return at < self._word_end()

    def _operator(self) -> bool:
        s, i = self.s, self.i
        for op in REDIRECT_OPS:
            if s.startswith(op, i):
                fd = ""
                if self.word is not None and "".join(self.word.raw).isdigit() and not self.word.quoted and op[0] in "<>":
                    fd, self.word = "".join(self.word.raw), None
                self.end_word()
                if self.pending_redirect is not None:
                    self.seg.redirects.append(self.pending_redirect)
                self.pending_redirect = Redirect(op, fd)
                self.i += len(op)
                return True
        for op in SEGMENT_OPS:
            if s.startswith(op, i):
                self.end_segment(op)
                self.i += len(op)
                return True
        return False

    def _escape(self) -> None:
        nxt = self.s[self.i + 1 : self.i + 2]
        if nxt == "\n":
            self.i += 2
            return
        word = self._w()
        word.quoted = True
        word.text.append(nxt)
        self.i += 2

    def _single(self) -> None:
        end = self.s.find("'", self.i + 1)
        word = self._w()
        word.quoted = True
        if end < 0:
            self.problem = self.problem or "an unterminated single quote"
            end = len(self.s)
        word.text.append(self.s[self.i + 1 : end])
        self.i = end + 1

    def _double(self) -> None:
        word = self._w()
        word.quoted = True
        self.i += 1
        while self.i < len(self.s) and self.s[self.i] != '"':
            c = self.s[self.i]
            if c == "\\" and self.i + 1 < len(self.s):
                nxt = self.s[self.i + 1]
                word.text.append(nxt if nxt in '"\\$`\n' else c + nxt)
                self.i += 2
            elif c == "$":
                self._dollar(word)
            elif c == "`":
                self._backtick(word)
            else:
                word.text.append(c)
                self.i += 1
        if self.i >= len(self.s):
            self.problem = self.problem or "an unterminated double quote"
        self.i += 1

    def _expansion(self, word: _Pieces, c: str) -> None:
        if c == "`":
            self._backtick(word)
        else:
            self._dollar(word)

    def _dollar(self, word: _Pieces) -> None:
        s, i = self.s, self.i
        if s.startswith("$((", i):
            inner = self._balanced(i + 3, "((", "))", pair=True)
            word.var = True
            word.text.append("$((" + inner + "))")
            return
        if s.startswith("$(", i):
            inner = self._balanced(i + 2, "(", ")")
            word.subs.append(inner)
            word.text.append("$(" + inner + ")")
            return
        if s.startswith("${", i):
            inner = self._balanced(i + 2, "{", "}")
            word.var = True
            word.text.append("${" + inner + "}")
            return
        nxt = s[i + 1 : i + 2]
        if nxt and (nxt in _NAME_START or nxt in _SPECIAL_VARS):
            j = i + 2
            if nxt in _NAME_START:
                while j < len(s) and (s[j].isalnum() or s[j] == "_"):
                    j += 1
            word.var = True
            word.text.append(s[i:j])
            self.i = j
            return
        if nxt == "'":  # $'...' ANSI-C quoting: a literal
            end = s.find("'", i + 2)
            end = len(s) if end < 0 else end
            word.quoted = True
            word.text.append(s[i + 2 : end])
            self.i = end + 1
            return
        word.text.append("$")
        self.i += 1

    def _backtick(self, word: _Pieces) -> None:
        j = self.i + 1
        while j < len(self.s) and self.s[j] != "`":
            j += 2 if self.s[j] == "\\" else 1
        if j >= len(self.s):
            self.problem = self.problem or "an unterminated backquote"
        inner = self.s[self.i + 1 : j]
        word.subs.append(inner.replace("\\`", "`"))
        word.text.append("`" + inner + "`")
        self.i = j + 1

    def _balanced(self, start: int, open_: str, close: str, pair: bool = False) -> str:
        """Text up to the matching ``close`` (quotes respected); sets ``self.i`` after it."""
        depth = 1
        j = start
        s = self.s
        while j < len(s):
            c = s[j]
            if c == "\\":
                j += 2
                continue
            if c == "'":
                k = s.find("'", j + 1)
                j = len(s) if k < 0 else k + 1
                continue
            if c == '"':
                k = j + 1
                while k < len(s) and s[k] != '"':
                    k += 2 if s[k] == "\\" else 1
                j = k + 1
                continue
            if s.startswith(close, j):
                depth -= 1
                if depth == 0:
                    self.i = j + len(close)
                    return s[start:j]
                j += len(close)
                continue
            if open_ == "(" and s.startswith("$(", j):
                depth += 1
                j += 2
                continue
            if s.startswith(open_, j):
                depth += 1
                j += len(open_)
                continue
            j += 1
        self.problem = self.problem or f"an unbalanced {open_!r}"
        self.i = len(s)
        return s[start:]

    def _heredoc_bodies(self) -> None:
        s = self.s
        while self.pending_heredocs:
            delimiter, strip_tabs, seg = self.pending_heredocs.pop(0)
            body: list[str] = []
            while self.i < len(s):
                end = s.find("\n", self.i)
                end = len(s) if end < 0 else end
                line = s[self.i : end]
                self.i = end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                body.append(line)
            else:
                self.problem = self.problem or "a here-document without its end marker"
            seg.heredocs.append("\n".join(body))


def parse(command: str) -> Parsed:
    """Split ``command`` into segments; ``problem`` is set when a shell would not parse it."""
    return _Lexer(command).run()
