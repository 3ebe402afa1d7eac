"""What a segment says about the ones after it: a ``cd`` moves them, a ``find`` feeds a pipe.

``plan`` judges segments one by one; these readers give it the context that carries over
(``reach.Reach``): the folder a ``cd``/``pushd`` names, and the start folders of a ``find``
(or ``fd``) whose output a later ``xargs`` in the same pipeline turns into arguments, and the
files a download writes (a later segment that runs one runs the download).
"""

from __future__ import annotations

import os
import posixpath

from kernel_ext.shellplan.lexer import Segment, Word
from kernel_ext.shellplan.verdict import Verdict

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


def fold(path: str) -> str:
    return posixpath.normpath(path) if path else path


def downloads(seg: Segment, verdict: Verdict) -> list[str]:
    """The files a network segment writes: its ``write`` effects (``curl -o``, ``wget -O``, the
    remote name) and where its output is redirected (``curl URL > x.sh``)."""
    named = [p for op, paths in verdict.effects if op == "write" for p in paths]
    named += [r.target.text for r in seg.redirects if r.target is not None and r.op in (">", ">>", ">|", "&>", "&>>")]
    return [fold(p) for p in named if p]


def after_options(texts: list[str], valued: frozenset[str]) -> list[str]:
    i = 0
    while i < len(texts) and texts[i].startswith("-") and texts[i] != "-":
        if texts[i] == "--":
            return texts[i + 1 :]
        i += 2 if texts[i] in valued else 1
    return texts[i:]


def segment_text(seg: Segment) -> str:
    parts = [w.raw for w in seg.words]
    parts.extend(f"({g})" for g in seg.groups)
    parts.extend(f"{r.fd}{r.op}{r.target.raw if r.target else ''}" for r in seg.redirects)
    return " ".join(p for p in parts if p)[:200]
