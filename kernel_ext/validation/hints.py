"""What the domain model tells the create probe, as plain data the sandboxed child can read.

Per class: whether it is abstract (not created, not a failure), which request fields hold
ids of which other class (the opposite association ends, inherited ones included), its
methods' parameter types, and its concrete subclasses (an abstract class's actions run on
one of them). Without a model the probe falls back to names and the OpenAPI document.
"""

from __future__ import annotations

from typing import Any


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
        }
    return {"entities": entities}


def _all_parents(cls: Any) -> list[Any]:
    getter = getattr(cls, "all_parents", None)
    try:
        return list(getter()) if callable(getter) else []
    except Exception:  # noqa: BLE001 - a malformed hierarchy just gives no hints
        return []
