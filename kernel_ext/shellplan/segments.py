"""What a segment says about the ones after it: a ``cd`` moves them, a ``find`` feeds a pipe.

``plan`` judges segments one by one; these readers give it the context that carries over
(``reach.Reach``): the folder a ``cd``/``pushd`` names, and the start folders of a ``find``
(or ``fd``) whose output a later ``xargs`` in the same pipeline turns into arguments.
"""

from __future__ import annotations

import os

from kernel_ext.shellplan.lexer import Segment, Word

LEADING_KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "esac"})


def assignment(word: Word) -> bool:
    name, eq, _ = word.raw.partition("=")
    return bool(eq) and name.isidentifier()



def _program_at(words: list[Word]) -> int:
    i = 0
    while i < len(words) and not words[i].quoted and words[i].text in LEADING_KEYWORDS:
        i += 1
    while i < len(words) and assignment(words[i]):
        i += 1
    return i


def cd_target(seg: Segment) -> tuple[bool, str | None]:
    """``(True, folder)`` for ``cd``/``pushd``/``popd`` ("" for home, None when not known); ``(False, None)`` otherwise."""
    at = _program_at(seg.words)
    if at >= len(seg.words) or seg.words[at].text not in ("cd", "pushd", "popd", "chdir"):
        return False, None
    words = seg.words[at:]
    rest = [w for w in words[1:] if not (w.text.startswith("-") and w.text != "-")]
    if not rest:
        return True, None if words[0].text == "popd" else ""
    first = rest[0]
    computed = first.dynamic and not first.text.startswith(("$HOME", "${HOME}"))
    return True, None if words[0].text == "popd" or first.text == "-" or computed else first.text


def find_roots(seg: Segment) -> list[str] | None:
    """The start folders of a ``find`` that prints names (None: the segment is no such ``find``)."""
    at = _program_at(seg.words)
    if at >= len(seg.words) or os.path.basename(seg.words[at].text) not in ("find", "fd", "fdfind"):
        return None
    words = seg.words[at:]
    if os.path.basename(words[0].text) != "find":  # fd PATTERN [PATH...]
        return [w.text for w in words[1:] if not w.text.startswith("-")][1:]
    return start_paths([w.text for w in words[1:]])


def start_paths(args: list[str]) -> list[str]:
    """``find``'s start folders: the words before its expression, past ``-H``/``-L``/``-P``/``-D x``/``-O3``."""
    i = 0
    while i < len(args) and (args[i] in ("-H", "-L", "-P", "-D") or args[i].startswith("-O")):
        i += 2 if args[i] == "-D" else 1
    roots = []
    for text in args[i:]:
        if text.startswith(("-", "(", "!")):
            break
        roots.append(text)
    return roots


_DECLARERS = frozenset({"export", "declare", "typeset", "readonly", "local"})


def redefines(seg: Segment) -> str:
    """Why a later name may not run what it names after this segment ("" when it may): it sets
    ``PATH`` (``PATH=./bin:$PATH git``, ``export PATH=...``), defines an alias or hashes a path."""
    words = list(seg.words)
    at = _program_at(words)
    head = words[at].text if at < len(words) else ""
    settings = words[:at] + (words[at + 1:] if head in _DECLARERS else [])
    if any(w.raw.startswith(("PATH=", "PATH+=")) for w in settings):
        return "sets PATH"
    if head == "alias" and any("=" in w.text for w in words[at + 1:]):
        return "defines an alias"
    if head == "hash" and any(w.text.startswith("-") and "p" in w.text for w in words[at + 1:]):
        return "hashes a program's path"
    return ""
