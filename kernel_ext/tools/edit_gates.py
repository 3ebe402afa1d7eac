"""Gates on the text of an edit, before anything touches the disk.

* The ``NNN| `` gutter that ``read_file`` shows is removed only when it is uniform: at least
  two lines, every line carrying it, numbers consecutive. One numbered line, or a mix of
  numbered and plain lines, is refused (``numbered_text``): guessing which part is code
  is how a stray ``12| `` lands in a source file.
* New elisions are refused (``elision``): a comment such as ``# ... rest unchanged`` or a
  bare ``...`` line that the replaced text did not already contain means the model wrote a
  placeholder instead of the code, and applying it would delete the code it stands for.
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import pairwise

from kernel_ext.errors import ErrorCode, ToolFailure

_GUTTER = re.compile(r"^ *(\d+)\|(?: |$)")

_COMMENT = re.compile(r"^(?:#+|//+|/\*+|\*+|<!--|\{/\*+|--)\s*(?P<body>.*?)\s*(?:\*/\}?|-->)?$")
_ELLIPSIS = re.compile(r"\.\.\.|…")
_ELISION_WORDS = re.compile(
    r"\b(rest|remaining|remainder|unchanged|existing|same|previous|original|omitted|brevity|as before|and so on)\b",
    re.IGNORECASE,
)
_ELISION_PHRASES = re.compile(
    r"(\b(rest|remainder) of (the )?(file|code|class|function|method|module|implementation|component|body|page|"
    r"section|template|markup|list|logic)\b"
    r"|\b(existing|previous|original|other) (code|methods|functions|fields|logic|implementation|content|imports|"
    r"routes|lines)\b.*\b(unchanged|here|remains?|stays?|omitted|as before|as is)\b"
    r"|\b(code|everything|rest|methods|functions|fields|lines|content)\b.*\b(unchanged|omitted|as before|for brevity)\s*$)",
    re.IGNORECASE,
)


def strip_gutter(text: str, field: str = "new_text") -> str:
    """``text`` without a uniform ``NNN| `` gutter; refuse a partial or single numbered line."""
    if not text:
        return text
    body = text.removesuffix("\n")
    lines = body.split("\n")
    hits = [_GUTTER.match(line) for line in lines]
    numbered = sum(1 for hit in hits if hit)
    if numbered == 0:
        return text
    if numbered == len(lines) and len(lines) >= 2:
        numbers = [int(hit.group(1)) for hit in hits if hit]
        if all(b == a + 1 for a, b in pairwise(numbers)):
            stripped = [line[hit.end():] for line, hit in zip(lines, hits, strict=False) if hit]
            return "\n".join(stripped) + ("\n" if text.endswith("\n") else "")
    where = next(i for i, hit in enumerate(hits) if hit) + 1
    raise ToolFailure(
        ErrorCode.NUMBERED_TEXT,
        f"{field} line {where} starts with a read_file line number ({lines[where - 1][:40]!r}). The 'NNN| ' gutter is "
        "removed only when every line carries it with consecutive numbers; send the code without line numbers",
    )


def elision_lines(text: str) -> Counter:
    """The placeholder-looking lines of ``text`` (normalised), counted."""
    found: Counter = Counter()
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if line in ("...", "…"):
            found[line] += 1
            continue
        match = _COMMENT.match(line)
        if match is None:
            continue
        body = match.group("body")
        if _is_elision_comment(body):
            found[line] += 1
    return found


def _is_elision_comment(body: str) -> bool:
    if not body:
        return False
    if body.startswith(("...", "…")):
        return True
    if _ELLIPSIS.search(body) and _ELISION_WORDS.search(body):
        return True
    return bool(_ELISION_PHRASES.search(body))


def refuse_new_elisions(old: str, new: str, path: str) -> None:
    """Refuse when ``new`` has placeholder lines that ``old`` did not already have."""
    added = elision_lines(new) - elision_lines(old)
    if added:
        sample = ", ".join(repr(line) for line in list(added)[:3])
        raise ToolFailure(
            ErrorCode.ELISION,
            f"the new text for {path!r} contains placeholder lines ({sample}) that stand for code it does not include. "
            "Send the complete text; to keep lines unchanged, leave them out of the edited range. "
            "(For an intentional Ellipsis statement write `pass` or `raise NotImplementedError`.)",
            {"elisions": list(added)},
        )
