"""How deep JSON may nest: one bound and one iterative check, for every JSON the host takes.

A REST body and a model's tool arguments are both untrusted JSON. ``json.loads`` follows a
nesting of hundreds of levels, and every walker after it (validators, ``safetext``, event
building) would recurse as deep: past ``MAX_JSON_DEPTH`` the value is refused by name where it
enters (``server/handlers/base.py`` ``parse_json_body``; the boundary's argument parser).
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_JSON_DEPTH", "json_deeper_than"]

MAX_JSON_DEPTH = 64  # arrays and objects inside each other; a run request or a tool call needs a handful


def json_deeper_than(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
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
