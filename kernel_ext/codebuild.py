"""Python the host writes around values it did not author: built from literals, then checked.

A template is the host's own code with holes (``$name``, ``string.Template``) where values go.
``build`` renders each value as a Python literal (``repr`` of a str, int, float, bool or None,
and of lists, tuples and str-keyed dicts of them), fills the holes, parses the result
(``pyparse``) and compares its tree with the template's: every node outside a hole must be the
template's own, so the code's names and calls are only the builder's, and each hole must be a
literal equal to its value, a string being exactly one constant. Nothing is ever cut or
rewritten in code text (a value is redacted before it is rendered): a cell whose check fails is
refused (``CodeNotBuilt``) and never returned, half-built or otherwise.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from string import Template
from typing import Any

from kernel_ext.pyparse import parse_source

__all__ = ["CodeNotBuilt", "build", "literal"]

_HOLE = "__besser_hole_{}__"


class CodeNotBuilt(ValueError):
    """The built code is not the template with literal values in its holes (``code`` is stable)."""

    code = "CODE_NOT_BUILT"


def literal(value: Any) -> str:
    """``value`` as Python literal source (``CodeNotBuilt`` for a value with no literal form)."""
    _check_kind(value, 0)
    if isinstance(value, list) and len(value) > 1 and all(isinstance(item, str) for item in value):
        return "[\n" + "".join(f"    {item!r},\n" for item in value) + "]"  # lines a reader can scroll
    return repr(value)


def build(template: str, values: Mapping[str, Any], *, max_bytes: int | None = None) -> str:
    """``template`` with each ``$name`` hole filled by ``literal(values[name])``, checked (see the
    module's doc); ``max_bytes``: the parse bound (None: unbounded, for a cell carrying data)."""
    holes = Template(template)
    names = holes.get_identifiers()
    if not holes.is_valid() or set(names) != set(values):
        raise CodeNotBuilt(f"the template's holes {sorted(names)} are not the values given {sorted(values)}")
    shape = _parse(holes.substitute({name: _HOLE.format(name) for name in names}), None)
    found = [n.id for n in ast.walk(shape) if isinstance(n, ast.Name) and n.id.startswith("__besser_hole_")]
    if sorted(found) != sorted(_HOLE.format(name) for name in names):
        raise CodeNotBuilt("each hole must stand once, where an expression goes")
    source = holes.substitute({name: literal(value) for name, value in values.items()})
    _same(shape, _parse(source, max_bytes), {_HOLE.format(name): value for name, value in values.items()})
    return source


def _parse(source: str, max_bytes: int | None) -> ast.Module:
    try:
        return parse_source(source, "<host-built code>", max_bytes=max_bytes, top_level_await=True)
    except SyntaxError as exc:
        raise CodeNotBuilt(f"the built code does not parse ({exc.msg})") from None


def _same(shape: Any, built: Any, holes: Mapping[str, Any]) -> None:
    """``built`` is ``shape`` node for node, each hole a literal of its value."""
    if isinstance(shape, ast.Name) and shape.id in holes:
        if not _is_literal(built, holes[shape.id]):
            raise CodeNotBuilt(f"a value is not one literal in the built code (line {getattr(built, 'lineno', '?')})")
        return
    if type(shape) is not type(built):
        raise CodeNotBuilt(f"the built code differs from its template ({type(shape).__name__} became {type(built).__name__})")
    if isinstance(shape, list):
        if len(shape) != len(built):
            raise CodeNotBuilt("the built code differs from its template (a list of nodes changed length)")
        for a, b in zip(shape, built, strict=True):
            _same(a, b, holes)
    elif isinstance(shape, ast.AST):
        for name in shape._fields:
            _same(getattr(shape, name, None), getattr(built, name, None), holes)
    elif shape != built:
        raise CodeNotBuilt(f"the built code differs from its template ({shape!r} became {built!r})")


def _is_literal(node: ast.AST, value: Any) -> bool:
    if isinstance(value, (bool, type(None))):
        return isinstance(node, ast.Constant) and node.value is value
    if isinstance(value, (str, bytes, int, float)):
        if isinstance(value, (int, float)) and repr(value).startswith("-"):
            return (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
                    and _is_literal(node.operand, -value))
        return isinstance(node, ast.Constant) and type(node.value) is type(value) and node.value == value
    if isinstance(value, (list, tuple)):
        kind = ast.List if isinstance(value, list) else ast.Tuple
        return (isinstance(node, kind) and len(node.elts) == len(value)
                and all(_is_literal(n, v) for n, v in zip(node.elts, value, strict=True)))
    if isinstance(value, dict):
        return (isinstance(node, ast.Dict) and len(node.keys) == len(value)
                and all(k is not None and _is_literal(k, key) and _is_literal(v, item)
                        for k, v, (key, item) in zip(node.keys, node.values, value.items(), strict=True)))
    return False


def _check_kind(value: Any, depth: int) -> None:
    if depth > 32:
        raise CodeNotBuilt("a value nests too deeply to be written as a literal")
    if isinstance(value, float) and not math.isfinite(value):
        raise CodeNotBuilt("a float that is not finite has no literal form")
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_kind(item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise CodeNotBuilt(f"a mapping key of type {type(key).__name__} is not written as a literal")
            _check_kind(item, depth + 1)
    elif not isinstance(value, (str, bytes, int, float, bool, type(None))):
        raise CodeNotBuilt(f"a {type(value).__name__} has no literal form")
