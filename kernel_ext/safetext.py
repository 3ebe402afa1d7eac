"""Text that can always be written: the one cleaning every event field passes through.

A model's stream (or a file name, or a tool's output) can hold text no log can take: a lone
surrogate (``"\\ud800"`` in a JSON chunk decodes to one), NULs and terminal escapes. Such a
string fails ``encode("utf-8")`` (ending a run unnamed) or rewrites the person's terminal. Each
lone surrogate becomes U+FFFD; each control character other than ``\\n`` and ``\\t`` is shown
as an escape (``\\x1b``), ``\\r\\n`` becoming ``\\n``. Non-finite floats inside a payload become
``null``, which JSON can hold. ``hosting/events.py`` applies it to every event built.

``valid_unicode`` is the lighter rule for data the host keeps (a model's text, the values of
its tool calls as the planner reads them): lone surrogates only, control characters kept, so
any file or request body can hold it.

Both walk containers to at most ``WALK_DEPTH`` levels (deeper than any JSON the host accepts,
``safejson.MAX_JSON_DEPTH``, plus an event's own wrapping); a subtree below that becomes the
string ``DEEP``, so no event build can exhaust the interpreter's recursion limit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "BLANK",
    "DEEP",
    "INVISIBLE",
    "MAX_CALL_ID_CHARS",
    "MAX_TOOL_NAME_CHARS",
    "WALK_DEPTH",
    "article",
    "clip",
    "line_range",
    "plural",
    "safe_text",
    "safe_value",
    "shorten",
    "shown_line",
    "shown_text",
    "valid_unicode",
]

# What an endpoint may name: a tool (every real one is a short identifier) and a call's wire id.
# A stream past either is cut off (providers/bounds.py); any other path clips (``clip``).
MAX_TOOL_NAME_CHARS = 128
MAX_CALL_ID_CHARS = 256

WALK_DEPTH = 128
DEEP = f"[nested deeper than {WALK_DEPTH} levels; not shown]"

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _replace(match: re.Match[str]) -> str:
    char = match.group()
    return "\ufffd" if "\ud800" <= char <= "\udfff" else f"\\x{ord(char):02x}"


# Characters that show as nothing: every format character (Unicode category Cf: the bidi
# embeddings, overrides and isolates U+202A-U+202E / U+2066-U+2069 that reorder a line, zero-width
# spaces and joiners, marks, tags) and the other default-ignorable code points (the combining
# grapheme joiner U+034F, variation selectors, Hangul fillers, U+2065, U+FFF0-U+FFF8, the whole
# tag plane). A page escapes them (``shown_text``) and the secret matcher reads past them
# (``kernel_ext.unmask``), so no text shows a key with hidden seams. Kept to this table (tests
# check it against ``unicodedata``) so import stays fast.
INVISIBLE = (
    "\xad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
# Characters that are not format characters yet may show as nothing or as a blank in a key's
# seams (red team 2): the braille blank U+2800, the object replacement U+FFFC, private use
# (U+E000-U+F8FF and planes 15-16: no glyph in most fonts, none at all on a terminal) and the
# noncharacters U+FDD0-U+FDEF, U+FFFE, U+FFFF. Shown escaped and read past, like ``INVISIBLE``.
BLANK = "\u2800\ufffc\ue000-\uf8ff\ufdd0-\ufdef\ufffe\uffff\U000f0000-\U0010ffff"
# What a terminal or a page must show, not obey: line and paragraph separators (U+2028/9,
# U+0085), every invisible character above and the blanks.
_SPOOF = re.compile(f"[\x85\u2028\u2029{INVISIBLE}{BLANK}]")


def shown_text(text: str) -> str:
    """``text`` (already ``safe_text``) for a terminal line or an HTML page: each separator and
    format character is shown as its escape (``\\u202e``), so nothing can reorder or split what
    a person reads."""
    text = safe_text(text)
    if _SPOOF.search(text) is None:
        return text
    return _SPOOF.sub(lambda m: f"\\u{ord(m.group()):04x}" if ord(m.group()) < 0x10000 else f"\\U{ord(m.group()):08x}", text)


def shown_line(text: str) -> str:
    """``text`` as ``shown_text`` shows it, on one line: a newline is shown as ``\\n`` too (a message
    that names a file a person typed stays the one line it promises)."""
    return shown_text(text).replace("\n", "\\n")


def safe_text(text: str) -> str:
    """``text`` as valid, printable-safe Unicode (unchanged when it already is)."""
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_replace, text.replace("\r\n", "\n"))


def clip(text: str, limit: int = MAX_TOOL_NAME_CHARS) -> str:
    """``text`` cut to ``limit`` characters plus a note of the cut (unchanged when it fits)."""
    return text if len(text) <= limit else f"{text[:limit]}…[{len(text) - limit} chars cut]"


# -- wording: what a person reads (one rule each, shared by the widgets, the CLI and tool text) --


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending in an ellipsis when it was cut; the cut
    falls between words when a space lies in the last fifth of what is kept ("a protected…", never
    "a protected rout…")."""
    if len(text) <= limit:
        return text
    kept = text[: max(limit - 1, 0)]
    space = kept.rfind(" ")
    if space >= max(len(kept) - max(len(kept) // 5, 1), 1) and not text[len(kept)].isspace():
        kept = kept[:space]
    return kept.rstrip() + "…"


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 file``, ``2 files``, ``0 files``; ``many`` for an irregular plural (``entry``/``entries``)."""
    return f"{count:,} {noun if count == 1 else (many or noun + 's')}"


_A_BEFORE = ("uni", "use", "usu", "uti", "uu", "one", "once", "eu", "ew")  # a vowel letter, a consonant sound
_AN_BEFORE = ("hour", "honest", "honor", "honour", "heir")  # a silent h


def article(word: str) -> str:
    """``word`` with its indefinite article, by sound: ``an int``, ``a str``, ``a union``, ``an hour``,
    ``a UUID`` (of acronyms only a leading ``U`` is read as a sound)."""
    bare = word.lstrip()
    lower = bare.lower()
    if (bare[:1] == "U" and bare[:2].isupper()) or lower.startswith(_A_BEFORE):
        return f"a {word}"
    vowel = lower[:1] in tuple("aeiou") or lower.startswith(_AN_BEFORE)
    return f"{'an' if vowel else 'a'} {word}"


def line_range(first: int, last: int) -> str:
    """``line 9`` or ``lines 9-12``: a range of one line is that line."""
    return f"line {first}" if last <= first else f"lines {first}-{last}"


def _walk(value: Any, on_text: Callable[[str], str], depth: int, finite: bool) -> Any:
    if isinstance(value, str):
        return on_text(value)
    if isinstance(value, (dict, list, tuple)) and depth >= WALK_DEPTH:
        return DEEP
    if isinstance(value, dict):
        return {_walk(k, on_text, depth, finite) if isinstance(k, str) else k: _walk(v, on_text, depth + 1, finite)
                for k, v in value.items()}
    if isinstance(value, list) or (finite and isinstance(value, tuple)):
        return [_walk(v, on_text, depth + 1, finite) for v in value]
    if finite and isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def safe_value(value: Any) -> Any:
    """``value`` with every string (dict keys too) made safe, depth-bounded; a new container."""
    return _walk(value, safe_text, 0, True)


def _valid_text(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def valid_unicode(value: Any) -> Any:
    """``value`` with every lone surrogate (in strings, keys, nested) replaced by U+FFFD, depth-bounded."""
    return _walk(value, _valid_text, 0, False)
