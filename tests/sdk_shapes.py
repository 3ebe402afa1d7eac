"""A body against an official SDK's typed parameters (TypedDicts), with undeclared keys refused.

pydantic validates a TypedDict's types and required keys but lets extra keys through, and takes
an ``Iterable[...]`` field lazily (its items unchecked until read). So the walk here goes down
the value itself: at each object it finds the TypedDict it is (of a union, the members that
validate; of those, the one that declares the most of its keys), validates it with pydantic, and
names every key the TypedDict does not declare; lists and iterables are walked item by item.
"""

from __future__ import annotations

import collections.abc
import functools
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from pydantic import TypeAdapter, ValidationError
from typing_extensions import Annotated, NotRequired, ReadOnly, Required, is_typeddict

_WRAPPERS = (Required, NotRequired, ReadOnly, Annotated)
_SEQUENCES = (list, tuple, collections.abc.Iterable, collections.abc.Sequence)


def _unwrap(hint: Any) -> Any:
    while get_origin(hint) in _WRAPPERS:
        hint = get_args(hint)[0]
    return hint


@functools.cache
def _adapter(hint: Any) -> TypeAdapter:
    return TypeAdapter(hint)


def _validates(value: Any, hint: Any) -> bool:
    try:
        _adapter(hint).validate_python(value)
    except ValidationError:
        return False
    return True


def problems(value: Any, hint: Any, path: str = "$") -> list[str]:
    """Every way ``value`` is not a ``hint``: pydantic's errors and the keys no TypedDict declares."""
    hint = _unwrap(hint)
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        members = [m for m in get_args(hint) if _validates(value, m)]
        if not members:
            return [f"{path}: {value!r:.80} is none of {hint}"]
        return min((problems(value, m, path) for m in members), key=len)
    if is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{path}: not an object ({hint.__name__})"]
        try:
            _adapter(hint).validate_python(value)
        except ValidationError as exc:
            return [f"{path} ({hint.__name__}): {e['loc']} {e['msg']}" for e in exc.errors()]
        fields = get_type_hints(hint, include_extras=True)
        found = [f"{path}.{key}: not a key of {hint.__name__}" for key in value if key not in fields]
        for key, item in value.items():
            if key in fields:
                found += problems(item, fields[key], f"{path}.{key}")
        return found
    if origin in _SEQUENCES and not isinstance(value, (str, bytes)):
        (item_hint, *_) = get_args(hint) or (Any,)
        if not isinstance(value, (list, tuple)):
            return [f"{path}: not a list"]
        return [p for i, item in enumerate(value) for p in problems(item, item_hint, f"{path}[{i}]")]
    if hint is Any or origin in (dict, collections.abc.Mapping) or origin is Literal:
        return [] if origin is not Literal or value in get_args(hint) else [f"{path}: {value!r} not in {get_args(hint)}"]
    return [] if _validates(value, hint) else [f"{path}: {value!r:.80} is not {hint}"]
