"""How the known-secret matcher reads a text: as what it spells, not as it is written.

A key can be written so that no run of its characters appears: percent-encoded byte by byte,
as ``\\uXXXX`` / ``\\xNN`` / octal ``\\163`` escapes (up to eight backslashes each), ``\\U`` and
``\\u{..}`` escapes, HTML entities (``&#116;``, ``&#x74;``, ``&sol;``), ``0x74 0x6f`` bytes, split by
backslash-newlines, with an invisible character (``safetext.INVISIBLE``: zero-width, format,
default-ignorable) or a blank-looking one (``safetext.BLANK``: braille blank, private use,
noncharacters; U+0640; an unassigned code point of the BMP), a combining mark or a non-ASCII space between its characters, spaced out
with ``SEPARATORS`` (hex split by colons or spaces is read as hex), in compatibility letters
(fullwidth, mathematical bold or italic, accented: each folded to the ASCII its NFKD spells), as
Unicode tag characters (a run of ``TAG_RUN`` or more read as the ASCII they shadow), or any of
these nested (``%2573``, ``%5Cu0073``, ``&#37;73``): decoding repeats to a fixed point, at most
``ROUNDS`` times. ``Reading`` turns a text into the bytes the matcher searches (decoded, then
invisible characters, marks and separators dropped) and maps what is found there back onto
the text as written, so a cut takes a key's whole escapes and nothing around them.

Linear in the text per round: a round on a text without ``%``, ``\\``, ``&``, ``0x`` or any
non-ASCII character does nothing; otherwise one ``finditer`` of a fixed lexer (every
alternative starts with a literal and its units are bounded, so Python's ``re`` does constant
work per position; RE2's per-match cost is about three times higher here, and a hit count is
what grows with hostile text) and, for non-ASCII text, one ``finditer`` of the fold table (built
once, lazily, from ``unicodedata``); the drops are C-level ``sub``/``translate``; mapping back
costs only where a cut is.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections.abc import Callable
from html.entities import html5 as _ENTITIES

from kernel_ext.safetext import BLANK, INVISIBLE

# Read past: whitespace, the characters a key is split or spelled out with ("sk-a-b-c",
# "piece+piece", '"ab", "cd"', "74:6f:6b"), and ASCII control characters.
SEPARATORS = b" \t\r\n\f+-_.,\"':" + bytes([*range(0x00, 0x09), 0x0B, *range(0x0E, 0x20), 0x7F])
_SPACES = "\x80-\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_KASHIDA = "\u0640"  # Arabic tatweel: a stretch of the baseline between letters, read past (shown as it is)
ROUNDS = 3  # nested encodings decoded: percent of percent of \u escapes, no deeper
TAG_RUN = 4  # tag characters (U+E0000-E007F) in a run this long spell ASCII; fewer are invisible
_CONTINUATION = bytes(range(0x80, 0xC0))  # a UTF-8 byte that does not start a character
# A run of one kind of escape, with as many backslashes each (JSON of JSON doubles them). Every
# alternative starts with a bare literal, so ``re`` skips to the next ``%``, ``\``, ``&`` or ``0`` in C.
_ESCAPE = re.compile(
    r"%(?P<pct>[0-9A-Fa-f]{2}(?:%[0-9A-Fa-f]{2})*)"
    r"|\\(?P<xs>\\{0,7})(?P<x>x[0-9A-Fa-f]{2}(?:\\(?P=xs)x[0-9A-Fa-f]{2})*)"
    r"|\\(?P<us>\\{0,7})(?P<u>u[0-9A-Fa-f]{4}(?:\\(?P=us)u[0-9A-Fa-f]{4})*)"
    r"|\\(?P<os>\\{0,7})(?P<o>[0-3][0-7]{2}(?:\\(?P=os)[0-3][0-7]{2})*)"
    r"|\\(?P<nl>\r?\n)|0[xX](?<![0-9A-Za-z]0[xX])(?P<ox>[0-9A-Fa-f]{2})(?![0-9A-Za-z])"
    r"|\\\\{0,7}U(?P<cp>[0-9A-Fa-f]{8})|\\\\{0,7}u\{(?P<cpb>[0-9A-Fa-f]{1,6})\}"
    r"|&\#(?P<dec>[0-9]{1,7});?|&\#[xX](?P<hex>[0-9A-Fa-f]{1,6});?|&(?P<name>[A-Za-z][A-Za-z0-9]{1,31};)"
)
Unit = tuple[int, int, int, str]  # (text characters each, decoded characters each, how many, decoded)


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def spelled(text: str) -> str:
    """``text`` decoded and folded, invisible characters and marks dropped (separators kept)."""
    decoded = _decode(text)[0]
    return decoded if decoded.isascii() else _tables()[0].sub("", decoded)


@functools.cache
def _tables() -> tuple[re.Pattern[str], re.Pattern[str], dict[str, str]]:
    """(what is read past, what is folded, each fold): from ``unicodedata``, once, on the first
    non-ASCII text (a scan of the first two planes, ~0.1 s). A character folds when its NFKD
    without combining marks is ASCII (fullwidth, mathematical, accented, ligature letters)."""
    marks: list[int] = []
    folds: dict[str, str] = {}
    for code in range(0xA0, 0x20000):
        char = chr(code)
        if unicodedata.category(char) in ("Mn", "Me") or (code < 0x10000 and unicodedata.category(char) in ("Cn", "Cs")):
            marks.append(code)  # marks, and unassigned or surrogate code points of the BMP: no glyph of their own
        elif unicodedata.decomposition(char):
            base = "".join(c for c in unicodedata.normalize("NFKD", char) if unicodedata.category(c) not in ("Mn", "Me"))
            if base.isascii() and base:
                folds[char] = base
    codes = [ord(c) for c in folds]
    drop = re.compile(f"[{INVISIBLE}{BLANK}{_KASHIDA}{_SPACES}{_class(marks)}]+")
    fold = re.compile(f"[\U000e0000-\U000e007f]{{{TAG_RUN},}}|[{_class(codes)}]+")
    folds.update({chr(0xE0000 + code): chr(code) for code in range(0x80)})
    return drop, fold, folds


def _class(codes: list[int]) -> str:
    """Sorted code points as a character class body: exact in the BMP (``re`` keeps a bitmap
    there) and, beyond it, a few wide ranges (``re`` tries those in turn for every character)
    whose holes are historic-script letters and symbols: read past or as themselves, harmless."""
    return _ranges([c for c in codes if c < 0x10000]) + _ranges([c for c in codes if c >= 0x10000], gap=1024)


def _ranges(codes: list[int], gap: int = 1) -> str:
    """Sorted code points as a character class body (``a-z`` for each run with holes under ``gap``)."""
    runs: list[list[int]] = []
    for code in codes:
        if runs and code - runs[-1][1] <= gap:
            runs[-1][1] = code
        else:
            runs.append([code, code])
    return "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in runs)


class _Escapes:
    """Where each decoded escape came from, in text order: runs of equal-sized units."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int, int, int]] = []  # (source start, decoded start, decoded end, source each, decoded each)
        self.ends: list[int] = []

    def start(self, at: int) -> int:
        """Where in the text the decoded character ``at`` begins (a whole escape's start)."""
        i = bisect.bisect_right(self.ends, at)
        if i < len(self.rows) and self.rows[i][1] <= at:
            source, out, _, each_in, each_out = self.rows[i]
            return source + (at - out) // each_out * each_in
        return at if i == 0 else self._after(i - 1) + at - self.ends[i - 1]

    def end(self, at: int) -> int:
        """Where in the text the decoded characters before ``at`` end (a whole escape's end)."""
        if at == 0:
            return 0
        i = bisect.bisect_right(self.ends, at - 1)
        if i < len(self.rows) and self.rows[i][1] <= at - 1:
            source, out, _, each_in, each_out = self.rows[i]
            return source + ((at - 1 - out) // each_out + 1) * each_in
        return at if i == 0 else self._after(i - 1) + at - self.ends[i - 1]

    def _after(self, i: int) -> int:
        source, out, end, each_in, each_out = self.rows[i]
        return source + (end - out) // each_out * each_in


class _Path:
    """The way back through every round of decoding: each map in turn, last round first."""

    def __init__(self, maps: list[_Escapes]):
        self.maps = maps

    def start(self, at: int) -> int:
        for escapes in reversed(self.maps):
            at = escapes.start(at)
        return at

    def end(self, at: int) -> int:
        for escapes in reversed(self.maps):
            at = escapes.end(at)
        return at


def _decode(text: str) -> tuple[str, _Path | None]:
    """``text`` folded and unescaped, again on what that spelled, to a fixed point (``ROUNDS``)."""
    maps: list[_Escapes] = []
    for _ in range(ROUNDS):
        done = len(maps)
        if not text.isascii():
            text = _round(text, _tables()[1], _folded, maps)
        if "%" in text or "\\" in text or "&" in text or "0x" in text or "0X" in text:
            text = _round(text, _ESCAPE, _units, maps)
        if len(maps) == done:
            break
    return text, (_Path(maps) if maps else None)


def _round(text: str, pattern: re.Pattern[str], units: Callable[[re.Match[str]], list[Unit]], maps: list[_Escapes]) -> str:
    """One pass of ``pattern`` over ``text``: what each match spells, its map added to ``maps``."""
    pieces: list[str] = []
    escapes = _Escapes()
    rows, ends = escapes.rows, escapes.ends  # appended here directly: this loop runs once per escape
    last = out = 0
    for match in pattern.finditer(text):
        found = units(match)
        if not found:
            continue
        source, stop = match.span()
        pieces.append(text[last:source])
        out += source - last
        for each_in, each_out, count, decoded in found:
            pieces.append(decoded)
            rows.append((source, out, out + each_out * count, each_in, each_out))
            out += each_out * count
            ends.append(out)
            source += each_in * count
        last = stop
    if not escapes.rows:
        return text
    pieces.append(text[last:])
    maps.append(escapes)
    return "".join(pieces)


def _folded(match: re.Match[str]) -> list[Unit]:
    """A run of foldable characters (or of tag characters) as the ASCII each spells."""
    folds = _tables()[2]
    decoded = [folds.get(c, c) for c in match.group()]  # a hole in a wide range reads as itself
    if all(len(d) == 1 for d in decoded):
        return [(1, 1, len(decoded), "".join(decoded))]
    return [(1, len(d), 1, d) for d in decoded]


def _units(match: re.Match[str]) -> list[Unit]:
    kind = match.lastgroup or ""
    run = match.group()
    if kind in ("pct", "x", "u", "o"):
        prefix = "%" if kind == "pct" else "\\" + match.group(kind + "s") + ("" if kind == "o" else kind)
        width = len(prefix) + {"u": 4, "o": 3}.get(kind, 2)
        if kind == "o":
            raw = bytes(int(run[i + len(prefix) : i + width], 8) for i in range(0, len(run), width))
        else:
            raw = bytes.fromhex(run.replace(prefix, ""))
        decoded = raw.decode("utf-16-be", "surrogatepass") if kind == "u" else raw.decode("utf-8", "surrogateescape")
        if len(decoded) * width == len(run):  # one character per escape: a single run (the common case)
            return [(width, 1, len(decoded), decoded)]
        if kind == "u":
            return [(width * (2 if ord(c) > 0xFFFF else 1), 1, 1, c) for c in decoded]
        return [(width * len(c.encode("utf-8", "surrogateescape")), 1, 1, c) for c in decoded]
    if kind == "nl":  # a backslash-newline continues the line: read as the newline (a separator)
        return [(len(run), 1, 1, "\n")]
    if kind == "ox":
        return [(len(run), 1, 1, chr(int(match.group(kind), 16)))]
    if kind == "name":
        value = _ENTITIES.get(match.group("name"))
        return [(len(run), len(value), 1, value)] if value else []
    number = int(match.group(kind), 10 if kind == "dec" else 16)
    return [(len(run), 1, 1, chr(number))] if number <= 0x10FFFF else []


class Reading:
    """``text`` as the matcher reads it: ``dense`` (UTF-8, escapes decoded, invisible characters
    and separators dropped), and the way back from spans of ``dense`` to spans of ``text``."""

    def __init__(self, text: str):
        self.text = text
        self.decoded, self._escapes = _decode(text)
        visible = self.decoded if self.decoded.isascii() else _tables()[0].sub("", self.decoded)
        self.dense = encode(visible).translate(None, SEPARATORS)

    def spans(self, found: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Spans of ``dense`` bytes (in order, apart) as spans of ``text``: whole characters and
        escapes, from the first character kept to the last, separators inside included."""
        shown: list[tuple[int, int]] = []
        bytes_at, cursor = (0, 0), (0, 0)
        for start, end in found:
            bytes_at, first = self._characters(bytes_at, start)
            if start < len(self.dense) and self.dense[start] in _CONTINUATION:
                first -= 1  # a piece starting inside a character: the cut takes the character
            bytes_at, last = self._characters(bytes_at, end)
            cursor = _advance(self.decoded, cursor, max(first, cursor[1]))  # ends and starts in one character
            begin = _past_dropped(self.decoded, cursor[0])
            cursor = _advance(self.decoded, cursor, last)
            shown.append(self._source(begin, _past_marks(self.decoded, cursor[0])))
        return shown

    def held_from(self, count: int) -> int:
        """Where ``text``'s last ``count`` characters as read begin (an escape is held whole)."""
        kept = len(self.dense.translate(None, _CONTINUATION))
        if kept <= count:
            return 0
        at = _advance(self.decoded, (0, 0), kept - count)[0]
        return self._escapes.start(at) if self._escapes else at

    def _characters(self, cursor: tuple[int, int], at: int) -> tuple[tuple[int, int], int]:
        """Characters of ``dense`` wholly or partly before byte ``at`` (from a (byte, count) cursor)."""
        count = cursor[1] + len(self.dense[cursor[0] : at].translate(None, _CONTINUATION))
        return (at, count), count

    def _source(self, begin: int, end: int) -> tuple[int, int]:
        return (self._escapes.start(begin), self._escapes.end(end)) if self._escapes else (begin, end)


def _kept(chunk: str) -> int:
    """Characters of ``chunk`` the matcher reads (not invisible, not a separator)."""
    visible = chunk if chunk.isascii() else _tables()[0].sub("", chunk)
    return len(encode(visible).translate(None, SEPARATORS + _CONTINUATION))


def _dropped(char: str) -> bool:
    return (char.isascii() and ord(char) in SEPARATORS) or (not char.isascii() and _tables()[0].match(char) is not None)


def _past_dropped(text: str, at: int) -> int:
    """The first position at or after ``at`` whose character is read (each one skipped once)."""
    while at < len(text) and _dropped(text[at]):
        at += 1
    return at


def _past_marks(text: str, at: int) -> int:
    """Past the combining marks at ``at``: a cut takes a character with its accents."""
    while at < len(text) and not text[at].isascii() and unicodedata.category(text[at]) in ("Mn", "Me"):
        at += 1
    return at


def _advance(text: str, cursor: tuple[int, int], target: int) -> tuple[int, int]:
    """From ``cursor`` = (position, characters read before it), on until ``text[:position]``
    holds ``target`` characters read; each step a C-level scan of a chunk that cannot overshoot."""
    position, left = cursor[0], target - cursor[1]
    while left > 0:
        position = _past_dropped(text, position)
        chunk = text[position : position + left]
        if not chunk:
            break
        left -= _kept(chunk)
        position += len(chunk)
    return position, target
