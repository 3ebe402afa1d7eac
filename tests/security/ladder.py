"""The "diamond ladder" in every form a model comes in (shared by the inheritance tests).

A_i and B_i each inherit from both A_{i-1} and B_{i-1}: ``all_parents()`` of A_n walks
2^(n+1) paths. Depth 40 never finished; depth 10 (2,047 paths) is an ordinary, if odd, model.
"""

from __future__ import annotations

import json
from typing import Any

from kernel_ext.model.jsonform import FORMAT


def _classes(depth: int) -> list[str]:
    return [f"{side}{i}" for i in range(depth + 1) for side in "AB"]


def _edges(depth: int) -> list[tuple[str, str]]:
    """(general, specific), top of the ladder first."""
    return [(f"{p}{i - 1}", f"{c}{i}") for i in range(1, depth + 1) for c in "AB" for p in "AB"]


def ladder_json(depth: int) -> dict[str, Any]:
    classes = [{"name": n, "attributes": [{"name": "a", "type": "int", "multiplicity": "1..1"}] if n == "A0" else [], "methods": []}
               for n in _classes(depth)]
    return {"format": FORMAT, "version": 1, "name": "Diamond", "enumerations": [], "classes": classes, "associations": [],
            "generalizations": [{"general": g, "specific": s} for g, s in _edges(depth)], "constraints": []}


def ladder_text(depth: int, form: str) -> str:
    if form == "json":
        return json.dumps(ladder_json(depth))
    if form == "plantuml":
        lines = ["@startuml", "class A0 {", "  +a: int", "}"]
        lines += [f"class {n} {{\n}}" for n in _classes(depth)[1:]]
        lines += [f"{g} <|-- {s}" for g, s in _edges(depth)]
        return "\n".join([*lines, "@enduml", ""])
    lines = ["from besser.BUML.metamodel.structural import *"]
    lines += [f"{n} = Class(name='{n}')" for n in _classes(depth)]
    lines += [f"g_{g}_{s} = Generalization(general={g}, specific={s})" for g, s in _edges(depth)]
    names = ", ".join(_classes(depth))
    gens = ", ".join(f"g_{g}_{s}" for g, s in _edges(depth))
    lines.append(f"domain_model = DomainModel(name='Diamond', types={{{names}}}, generalizations={{{gens}}})")
    return "\n".join(lines) + "\n"


SUFFIX = {"json": ".json", "plantuml": ".plantuml", "python": ".py"}


def ladder_object(depth: int) -> Any:
    """A DomainModel holding the ladder, as a notebook could hand one over.

    Built by pointing each Generalization's fields directly (BESSER's own setters would walk the
    ladder exponentially while building it): only the finished object is under test.
    """
    from besser.BUML.metamodel.structural import Class, DomainModel, Generalization

    classes = {n: Class(name=n) for n in _classes(depth)}
    generalizations = set()
    for general, specific in _edges(depth):
        scratch_general, scratch_specific = Class(name="ScratchGeneral"), Class(name="ScratchSpecific")
        link = Generalization(general=scratch_general, specific=scratch_specific)
        scratch_general._delete_generalization(link)
        scratch_specific._delete_generalization(link)
        link._Generalization__general = classes[general]
        link._Generalization__specific = classes[specific]
        classes[general]._add_generalization(link)
        classes[specific]._add_generalization(link)
        generalizations.add(link)
    return DomainModel(name="Diamond", types=set(classes.values()), generalizations=generalizations)
