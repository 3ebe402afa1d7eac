"""What the domain model tells the create probe, as plain data the sandboxed child can read.

Per class: whether it is abstract (not created, not a failure), which request fields hold
ids of which other class (the opposite association ends, inherited ones included), its
methods' parameter types, its concrete subclasses (an abstract class's actions run on
one of them), and the numeric bounds its OCL invariants set on attributes (BESSER turns
``self.x >= 10 and self.x <= 120`` into a validator the OpenAPI schema does not show, so the
probe's "minimal valid data" must read them here). Without a model the probe falls back to
names and the OpenAPI document.
"""

from __future__ import annotations

import re
from typing import Any

# ``self.attr OP number`` or ``number OP self.attr``: the only invariant shape read for bounds
_COMPARISON = re.compile(r"^\(?\s*(?:self\.(\w+)\s*(<=|>=|<|>|=)\s*(-?\d+(?:\.\d+)?)"
                         r"|(-?\d+(?:\.\d+)?)\s*(<=|>=|<|>|=)\s*self\.(\w+))\s*\)?$")
_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "="}
_SCHEMA_KEYS = {">=": ("minimum",), ">": ("exclusiveMinimum",), "<=": ("maximum",), "<": ("exclusiveMaximum",),
                "=": ("minimum", "maximum")}
MAX_OCL_CHARS = 2000


def model_hints(model: Any) -> dict[str, Any] | None:
    """Hints for the probe from a B-UML ``DomainModel`` (None when there is no model)."""
    if model is None or not hasattr(model, "get_classes"):
        return None
    classes = list(model.get_classes())
    ancestors = {cls.name: _all_parents(cls) for cls in classes}  # one walk each (bounded: model/inheritance.py)
    parents = {name: [p.name for p in found] for name, found in ancestors.items()}
    entities: dict[str, Any] = {}
    for cls in classes:
        lineage = {cls.name, *parents[cls.name]}
        references: dict[str, str] = {}
        for association in getattr(model, "associations", ()) or ():
            ends = list(getattr(association, "ends", ()) or ())
            for end in ends:
                if getattr(end.type, "name", None) in lineage:
                    for other in ends:
                        if other is not end and getattr(other, "name", None):
                            references[other.name] = other.type.name
        methods: dict[str, dict[str, str]] = {}
        for owner in [cls, *ancestors[cls.name]]:
            for method in getattr(owner, "methods", ()) or ():
                params = {p.name: getattr(p.type, "name", str(p.type)) for p in getattr(method, "parameters", ()) or ()}
                methods.setdefault(method.name, params)
        entities[cls.name] = {
            "abstract": bool(getattr(cls, "is_abstract", False)),
            "references": references,
            "methods": methods,
            "subclasses": sorted(c.name for c in classes if cls.name in parents[c.name] and not getattr(c, "is_abstract", False)),
            "bounds": _bounds(model, lineage),
        }
    return {"entities": entities}


def ocl_bounds(expression: str) -> dict[str, dict[str, float]]:
    """JSON-schema bounds per attribute from an invariant that is only a conjunction of
    ``self.attr OP number`` comparisons; anything else (or, not, implies, navigation) gives none."""
    body = expression.split(":", 1)[1] if expression.lstrip().startswith("context") and ":" in expression else expression
    if len(body) > MAX_OCL_CHARS:
        return {}
    out: dict[str, dict[str, float]] = {}
    for term in re.split(r"\s+and\s+", body.strip()):
        match = _COMPARISON.match(term.strip())
        if match is None:
            return {}
        if match.group(1):
            name, op, number = match.group(1), match.group(2), match.group(3)
        else:
            name, op, number = match.group(6), _FLIP[match.group(5)], match.group(4)
        value = float(number) if "." in number else int(number)
        for key in _SCHEMA_KEYS[op]:
            out.setdefault(name, {})[key] = value
    return out


def _bounds(model: Any, lineage: set[str]) -> dict[str, dict[str, float]]:
    """The bounds of every invariant whose context is the class or one of its parents."""
    out: dict[str, dict[str, float]] = {}
    for constraint in getattr(model, "constraints", ()) or ():
        if getattr(getattr(constraint, "context", None), "name", None) in lineage:
            for name, bounds in ocl_bounds(str(getattr(constraint, "expression", "") or "")).items():
                out.setdefault(name, {}).update(bounds)
    return out


def _all_parents(cls: Any) -> list[Any]:
    getter = getattr(cls, "all_parents", None)
    try:
        return list(getter()) if callable(getter) else []
    except Exception:  # noqa: BLE001 - a malformed hierarchy just gives no hints
        return []
