"""JSON text the host did not write (a request body, a workspace file, a sandboxed process's reply).

``json.loads`` answers deep nesting (two megabytes of ``[``) with ``RecursionError``, which an
``except ValueError`` does not catch, and a nesting it does accept can still exhaust the stack
of whatever walks the value next (validators, redaction, ``json.dumps`` into an event). Every
parse of such text goes through ``loads`` here: too deep is ``JsonTooDeep``, a ``ValueError``
with a named reason, so every existing handler of bad JSON reports it as what it is.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DEFAULT_MAX_DEPTH", "MAX_JSON_DEPTH", "JsonTooDeep", "deeper_than", "loads"]

DEFAULT_MAX_DEPTH = 100  # arrays and objects inside each other; real documents need a handful
# A REST body and a model's tool arguments: refused by name past this where they enter
# (``server/handlers/base.py`` ``parse_json_body``; the boundary's argument parser), so no walker
# after them (validators, ``safetext``, event building) recurses deeper.
MAX_JSON_DEPTH = 64


class JsonTooDeep(ValueError):
    """JSON nested beyond ``max_depth`` (or beyond what the parser itself can take)."""

    code = "json_too_deep"

    def __init__(self, max_depth: int | None):
        limit = f"more than {max_depth} levels deep" if max_depth is not None else "deeper than the JSON parser can read"
        super().__init__(f"arrays or objects nest {limit}")
        self.max_depth = max_depth


def loads(text: str | bytes, max_depth: int | None = DEFAULT_MAX_DEPTH) -> Any:
    """``json.loads(text)``; ``JsonTooDeep`` past ``max_depth`` (None: only the parser's own limit)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise JsonTooDeep(max_depth) from None
    if max_depth is not None and deeper_than(value, max_depth):
        raise JsonTooDeep(max_depth)
    return value


def deeper_than(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when containers nest more than ``limit`` deep (iterative: no recursion to exhaust)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, (list, tuple)) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list, tuple)))
    return False
