"""``{{0.room.id}}``: later requests of a scenario use values from earlier responses.

A reference names an earlier request by its 0-based index and a path into that response's
JSON body: dotted keys, list indexes as ``.2`` or ``[2]`` (``-1`` is the last item), nothing
after the index for the whole body. A string that is exactly one reference takes the
referenced value with its JSON type (an id stays a number in a body); a reference inside
longer text is replaced by its text form (strings as-is, other values as JSON). In paths each
inserted value is percent-encoded, so a value can never add a path segment or a query.

Standard library only: the sandboxed child resolves references while it runs the requests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

REFERENCE = re.compile(r"\{\{\s*(-?\d+)\s*((?:\.[^.{}\[\]\s]+|\[-?\d+\])*)\s*\}\}")
_BRACES = re.compile(r"\{\{[^{}]*\}\}")
_STEP = re.compile(r"\.([^.{}\[\]\s]+)|\[(-?\d+)\]")
MISSING = object()


class ReferenceFailure(Exception):
    """A reference that cannot be resolved; the message says which and why."""


class Responses:
    """What earlier requests returned: ``bodies[i]`` is a parsed JSON body, ``MISSING`` when absent."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []
        self.notes: list[str] = []

    def add(self, body: Any, note: str = "") -> None:
        self.bodies.append(body)
        self.notes.append(note)


def parse_steps(path: str) -> list[str | int]:
    """``".room.id"`` or ``"items[0].id"`` -> ``["room", "id"]`` / ``["items", 0, "id"]``."""
    text = path if not path or path[0] in ".[" else "." + path
    steps: list[str | int] = []
    pos = 0
    for match in _STEP.finditer(text):
        if match.start() != pos:
            raise ReferenceFailure(f"cannot read the path {path!r} near {text[pos:]!r}")
        steps.append(match.group(1) if match.group(1) is not None else int(match.group(2)))
        pos = match.end()
    if pos != len(text):
        raise ReferenceFailure(f"cannot read the path {path!r} near {text[pos:]!r}")
    return steps


def walk(value: Any, steps: Sequence[str | int]) -> tuple[Any, str]:
    """Follow ``steps`` into ``value``; returns ``(found or MISSING, reason when missing)``."""
    current = value
    done: list[str] = []
    for step in steps:
        where = ".".join(done) or "the body"
        if isinstance(current, dict):
            key = str(step)
            if key not in current:
                fields = ", ".join(list(map(str, current))[:12]) or "none"
                return MISSING, f"{where} has no field {key!r} (fields: {fields})"
            current = current[key]
        elif isinstance(current, list):
            try:
                index = int(step)
            except ValueError:
                return MISSING, f"{where} is a list of {len(current)} items, not an object (step {step!r})"
            if not -len(current) <= index < len(current):
                return MISSING, f"{where} has {len(current)} items, no index {index}"
            current = current[index]
        else:
            kind = "null" if current is None else type(current).__name__
            return MISSING, f"{where} is {kind}, not an object or a list (step {step!r})"
        done.append(str(step))
    return current, ""


def lookup(responses: Responses, index: int, path: str, current: int, shown: str) -> Any:
    if index < 0 or index >= current:
        raise ReferenceFailure(f"{shown}: request {current} can only refer to requests 0-{current - 1}" if current else
                               f"{shown}: the first request cannot refer to an earlier response")
    if index >= len(responses.bodies) or responses.bodies[index] is MISSING:
        note = responses.notes[index] if index < len(responses.notes) else "it did not run"
        raise ReferenceFailure(f"{shown}: response {index} has no JSON body ({note})")
    found, reason = walk(responses.bodies[index], parse_steps(path))
    if found is MISSING:
        raise ReferenceFailure(f"{shown}: in response {index}, {reason}")
    return found


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def resolve_string(text: str, responses: Responses, current: int, *, typed: bool = False, in_path: bool = False) -> Any:
    """``text`` with every reference replaced (see the module docstring for the rules)."""
    check_syntax(text)
    whole = REFERENCE.fullmatch(text.strip()) if typed else None
    if whole:
        return lookup(responses, int(whole.group(1)), whole.group(2), current, whole.group(0))

    def replace(match: re.Match[str]) -> str:
        value = as_text(lookup(responses, int(match.group(1)), match.group(2), current, match.group(0)))
        return quote(value, safe="") if in_path else value

    return REFERENCE.sub(replace, text)


def check_syntax(text: str) -> None:
    """Refuse ``{{...}}`` that is not a reference (``{{room.id}}`` lacks the request index)."""
    for match in _BRACES.finditer(text):
        if not REFERENCE.fullmatch(match.group(0)):
            raise ReferenceFailure(
                f"{match.group(0)!r} is not a reference: write {{{{N.field.path}}}} with N the index of an earlier request"
            )


def resolve_value(value: Any, responses: Responses, current: int) -> Any:
    """A JSON value (request body, expected value) with references resolved, types kept."""
    if isinstance(value, str):
        return resolve_string(value, responses, current, typed=True) if "{{" in value else value
    if isinstance(value, list):
        return [resolve_value(item, responses, current) for item in value]
    if isinstance(value, dict):
        return {key: resolve_value(item, responses, current) for key, item in value.items()}
    return value
