"""The small predicate language of ``list_classes_with``.

    predicate := term ( ("and" | "&" | ",") term )*
    term      := ["not " | "!"] atom
    atom      := has_attribute:NAME   an attribute (own or inherited) named NAME
               | type:TYPE            an attribute of type TYPE (int, str, float, bool, date,
                                      datetime, time, timedelta, an enumeration or class name)
               | has_method:NAME      a method (own or inherited) named NAME
               | has_methods          at least one method (own or inherited)
               | has_constraints      at least one OCL constraint, own or inherited
                                      (alias: has_constraint)
               | associated_with:CLASS  an association end towards CLASS
               | extends:CLASS        CLASS is a direct or indirect parent
               | is_abstract | is_root (no parent) | is_leaf (no child)
               | name:PATTERN         the class name matches PATTERN (* and ? wildcards)

NAME and PATTERN are case-insensitive; NAME may use ``*`` and ``?`` wildcards too.
Exact names use the index's inverted maps; wildcards scan the (already flattened) classes.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.model.index import TYPE_ALIASES, ClassView, ModelIndex

MAX_PREDICATE_CHARS = 500
_SPLIT = re.compile(r"\s+and\s+|\s*&\s*|\s*,\s*", re.IGNORECASE)
WITH_ARGUMENT = ("has_attribute", "type", "has_method", "associated_with", "extends", "name")
FLAGS = ("has_methods", "has_constraints", "has_constraint", "is_abstract", "is_root", "is_leaf")
SYNTAX_HINT = (
    "use e.g. 'has_attribute:title', 'type:int', 'has_methods', 'has_constraints', "
    "'associated_with:Book', 'extends:Person', 'is_abstract', 'is_root', 'is_leaf', 'name:Book*', "
    "joined with 'and', each optionally prefixed with 'not'"
)


def select(index: ModelIndex, predicate: str) -> list[str]:
    """Names of the classes matching ``predicate``, sorted."""
    terms = parse(predicate)
    names = set(index.classes)
    for negated, test in terms:
        matched = test(index)
        names = names - matched if negated else names & matched
    return sorted(names)


def parse(predicate: str) -> list[tuple[bool, Callable[[ModelIndex], set[str]]]]:
    text = (predicate or "").strip()
    if not text:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"the predicate is empty; {SYNTAX_HINT}")
    if len(text) > MAX_PREDICATE_CHARS:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"the predicate is longer than {MAX_PREDICATE_CHARS} characters")
    terms = []
    for raw in _SPLIT.split(text):
        term = raw.strip()
        negated = False
        if term.lower().startswith("not "):
            negated, term = True, term[4:].strip()
        elif term.startswith("!"):
            negated, term = True, term[1:].strip()
        terms.append((negated, _atom(term)))
    return terms


def _atom(term: str) -> Callable[[ModelIndex], set[str]]:
    key, sep, arg = term.partition(":")
    key, arg = key.strip().lower(), arg.strip()
    if sep and key in WITH_ARGUMENT:
        if not arg:
            raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"{key!r} needs a value after ':'; {SYNTAX_HINT}")
        return _WITH[key](arg)
    if not sep and key in FLAGS:
        return _FLAGS[key]
    raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"unknown predicate {term!r}; {SYNTAX_HINT}")


def _is_glob(text: str) -> bool:
    return any(ch in text for ch in "*?[")


def _scan(index: ModelIndex, keep: Callable[[ClassView], bool]) -> set[str]:
    return {name for name, view in index.classes.items() if keep(view)}


def _has_attribute(arg: str) -> Callable[[ModelIndex], set[str]]:
    pattern = arg.lower()
    if not _is_glob(pattern):
        return lambda index: set(index.by_attribute.get(pattern, ()))
    return lambda index: _scan(index, lambda v: any(fnmatch.fnmatchcase(a.name.lower(), pattern) for a in v.attributes))


def _type(arg: str) -> Callable[[ModelIndex], set[str]]:
    wanted = TYPE_ALIASES.get(arg.lower(), arg.lower())
    return lambda index: set(index.by_type.get(wanted, ()))


def _has_method(arg: str) -> Callable[[ModelIndex], set[str]]:
    pattern = arg.lower()
    return lambda index: _scan(index, lambda v: any(fnmatch.fnmatchcase(m.name.lower(), pattern) for m in v.methods))


def _associated_with(arg: str) -> Callable[[ModelIndex], set[str]]:
    def run(index: ModelIndex) -> set[str]:
        target = index.find(arg)
        if target is None:
            raise _unknown_class(index, arg)
        return {name for name, near in index.neighbours.items() if target.name in near}

    return run


def _extends(arg: str) -> Callable[[ModelIndex], set[str]]:
    def run(index: ModelIndex) -> set[str]:
        parent = index.find(arg)
        if parent is None:
            raise _unknown_class(index, arg)
        return set(index.descendants.get(parent.name, ()))

    return run


def _name(arg: str) -> Callable[[ModelIndex], set[str]]:
    pattern = arg.lower()
    return lambda index: _scan(index, lambda v: fnmatch.fnmatchcase(v.name.lower(), pattern))


def _unknown_class(index: ModelIndex, name: str) -> ToolFailure:
    close = index.suggestions(name)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return ToolFailure(ErrorCode.NOT_FOUND, f"no class named {name!r} in model {index.name!r}{hint}")


_WITH: dict[str, Callable[[str], Callable[[ModelIndex], set[str]]]] = {
    "has_attribute": _has_attribute,
    "type": _type,
    "has_method": _has_method,
    "associated_with": _associated_with,
    "extends": _extends,
    "name": _name,
}
_FLAGS: dict[str, Callable[[ModelIndex], set[str]]] = {
    "has_methods": lambda index: _scan(index, lambda v: bool(v.methods)),
    "has_constraints": lambda index: _scan(index, lambda v: bool(v.constraints)),
    "has_constraint": lambda index: _scan(index, lambda v: bool(v.constraints)),
    "is_abstract": lambda index: _scan(index, lambda v: v.is_abstract),
    "is_root": lambda index: _scan(index, lambda v: not v.parents),
    "is_leaf": lambda index: _scan(index, lambda v: not v.children),
}
