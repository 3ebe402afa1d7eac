"""Host-owned patterns searched over model-supplied command text, on RE2: time linear in the text.

The patterns are the host's, but the text is the model's, and Python's ``re`` backtracks on
both: ``\\bdd\\s[^;&|]*\\bof=`` retries every ``dd`` to the end of ``dd dd dd ...`` and the old
fork-bomb pattern every suffix of one long word, so a 64 Ki-character command held the GIL
(and with it the server's event loop) for seconds to minutes. Every pattern the command policy
and ``sh_plan`` search a command with is a ``Scan``: compiled on RE2 at first use, matched over
the text's UTF-8 bytes (``\\w``, ``\\s``, ``\\b`` are ASCII, as the shell's words are).

RE2 has no lookaround and no backreferences: a boundary is written as a consumed character
class (a search only asks *whether*), and ``fork_bomb`` compares its captured names in Python.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["FORK_BOMB", "Scan", "fork_bomb"]


class Scan:
    """One host pattern, searched in linear time."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        self._compiled: Any = None

    def _regex(self) -> Any:
        if self._compiled is None:
            import re2  # lazy: %load_ext stays light

            options = re2.Options()
            options.log_errors = False
            self._compiled = re2.compile(self.pattern.encode(), options)
        return self._compiled

    def search(self, text: str) -> bool:
        """Whether the pattern occurs anywhere in ``text``."""
        return self._regex().search(_bytes(text)) is not None

    def finditer(self, text: str) -> Iterator[Any]:
        """Non-overlapping matches, leftmost first (groups are bytes)."""
        return self._regex().finditer(_bytes(text))


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


# ``NAME(){ NAME|NAME& }``: a name starts at a word boundary (``xf(){ f|f& }`` defines ``xf``),
# and a candidate's inner names cannot start another candidate, so non-overlapping matches miss none.
FORK_BOMB = Scan(r"(\b\w+|:)\s*\(\s*\)\s*\{\s*(\w+|:)\s*\|\s*(\w+|:)\s*&\s*\}")


def fork_bomb(text: str) -> bool:
    """Whether ``text`` defines a function that pipes itself into itself in the background."""
    return any(m.group(1) == m.group(2) == m.group(3) for m in FORK_BOMB.finditer(text))
